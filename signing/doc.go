// Package signing reads, verifies and writes OpenSSF Model Signing (OMS)
// v1.0 signatures, as the reference tool model_signing (1.1.1) does: a
// Sigstore bundle (mediaType application/vnd.dev.sigstore.bundle.v0.3+json)
// holding a DSSE envelope over an in-toto statement whose predicateType is
// https://model_signing/signature/v1.0. The statement lists the SHA-256 of
// every file of a model's folder (serialization "files"), or of every
// fixed-size range of each file ("shards"), leaves out the paths it names
// in ignore_paths (git's files, the signature), and digests the list in
// its subject.
//
// Sign writes what 'model_signing verify key' accepts, and Verify accepts
// what 'model_signing sign key' writes, with ECDSA keys on P-256, P-384
// and P-521 (the curves model_signing supports), in key mode (a public
// key, named in the bundle by the SHA-256 of its PEM) or certificate mode
// (the signing certificate and its chain in the bundle, checked against
// trusted certificates; see CertificateVerifier). Sigstore's keyless mode,
// which needs a transparency log and its trust root, is not supported.
//
// Everything in a signature is checked before use: its size, its JSON,
// its types, every resource's name (a path inside the folder, listed
// once) and the subject's digest over the resources. The folder is read
// through an os.Root, so that no name or symbolic link leads out of it.
//
// The package uses the standard library only.
package signing
