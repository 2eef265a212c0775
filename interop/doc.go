// Package interop checks what the dataset package writes with readers that
// share no code with it: the manifest against a JSON Schema of the
// connector's layout, with santhosh-tekuri/jsonschema, and the Parquet index
// with Apache Arrow's Go implementation. It is a separate module so that
// those dependencies stay out of the library's.
package interop
