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
//   - the dataset manifest against a JSON Schema of the connector's layout,
//     with santhosh-tekuri/jsonschema, and the Parquet index with Apache
//     Arrow's Go implementation.
//
// interop/run sets everything up and runs the tests; without it, the tests
// that need the oracle or Python skip (or fail, with INTEROP_REQUIRE=1).
package interop
