// Package verify checks that a model's bytes are the ones its publisher
// made: every file of the model against every reference that can be
// found for it, hashing each file once, files in parallel.
//
// The references:
//
//   - RefCacheBlob: in a snapshot of the Hugging Face cache
//     (.../models--ORG--NAME/snapshots/REVISION), each file is a link to
//     ../../blobs/NAME, where NAME is the SHA-256 of the content for a
//     file stored in Git LFS or Xet, and the git blob SHA-1 (the SHA-1 of
//     "blob SIZE\x00" and the content) for a small file kept in git.
//   - RefLinkedETag, RefETag: over HTTP, the Hub answers a file's request
//     with X-Linked-Etag (its SHA-256) and X-Linked-Size for a file stored
//     in LFS or Xet, and with an ETag that is its git blob SHA-1 for a
//     small file kept in git. The bytes hashed are those of the version
//     that answer pinned (see the remote package), read once.
//   - RefLFSPointer, RefGitHEAD: in a git clone (a folder that holds
//     .git itself; a repository the folder merely sits in is not looked
//     for), what HEAD commits for each file, read with the git command
//     when it is installed (ls-tree and cat-file, nothing else): the Git
//     LFS pointer (oid sha256:HEX, size N) of a file in LFS, the blob's
//     git SHA-1 of a file kept in git. A pointer file left in the folder
//     in place of the file it stands for is a failed RefLFSPointer check:
//     the content is missing. Line-ending conversion (core.autocrlf) makes
//     a text file differ from its blob.
//   - RefSignature: an OpenSSF Model Signing signature (see the signing
//     package), whose file list must be the folder's.
//   - RefTensorDigests: a Manifest of tensor digests (TensorDigests),
//     which holds for a safetensors file when each of its tensors has the
//     manifest's digest, whatever file held it when the manifest was
//     made, and for an index when it leads to the manifest's tensors.
//
// Beside them, the model's structure is checked as the checkpoint package
// opens it: every safetensors file valid, the index complete and in
// agreement with the shards.
//
// A file whose digest differs from a reference is an error naming the
// file, both digests and the reference; a file that no reference covers is
// said plainly (Report.Unchecked).
package verify
