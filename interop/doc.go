// Package interop checks the library against implementations that share no
// code with it. It is a separate module so that their dependencies stay out
// of the library's, and its tests are the whole package:
//
//   - the Rust reference, the safetensors crate, through the oracle program
//     in oracle/: its verdict on the conformance corpus and on thousands of
//     files generated afresh on each run (seeded by INTEROP_SEED), compared
//     with every entry point (NewReader, Open, NewReaderAt, ReadHeader and
//     Strict); and files from the library's writers, which the reference
//     must read as written and write again byte for byte;
//   - Python safetensors with NumPy, huggingface_hub's shard splitting and
//     pyarrow, through python/interop.py, which also computes the tensor
//     digests of docs/format.md from their definition with hashlib;
//   - model_signing 1.1.1, the reference of OpenSSF Model Signing, in a
//     virtual environment of its own (python/requirements-signing.txt):
//     signatures written by each side verified by the other on P-256,
//     P-384 and P-521, in key and certificate mode, the shards its Python
//     API writes, and tampering refused by both;
//   - the dataset manifest against a JSON Schema of the connector's layout,
//     with santhosh-tekuri/jsonschema, and the Parquet index with Apache
//     Arrow's Go implementation.
//
// interop/run sets everything up and runs the tests; without it, the tests
// that need the oracle, Python or model_signing skip (or fail, with INTEROP_REQUIRE=1).
package interop
