package check_test

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/check"
)

func ExampleModel() {
	// A model directory: its weights and the config.json beside them.
	r, err := check.Model(context.Background(), "../testdata/models/llama")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d tensors, %s configuration checked, %d errors, %d warnings\n", r.Tensors, r.Family, r.Errors(), r.Warnings())
	for _, f := range r.Findings {
		fmt.Println(f)
	}
	// Output:
	// 30 tensors, llama configuration checked, 0 errors, 0 warnings
}

// Run checks tensors from any safetensors.TensorSource, here a file held in
// memory; MaxAbs lowers the magnitude beyond which values are reported.
func ExampleRun() {
	nan := float32(math.NaN())
	w, err := safetensors.TensorFromFloat32s("model.layers.0.mlp.up_proj.weight", safetensors.F32, []uint64{2, 2}, []float32{1, nan, 3, nan}, safetensors.RoundNearestEven)
	if err != nil {
		panic(err)
	}
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{w}, nil); err != nil {
		panic(err)
	}
	src, err := safetensors.NewReader(file.Bytes())
	if err != nil {
		panic(err)
	}
	r, err := check.Run(context.Background(), src, check.MaxAbs(2))
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Errors(), "error(s),", r.Warnings(), "warning(s)")
	for _, f := range r.Findings {
		fmt.Println(f.Kind, f.Count, *f.First)
	}
	// Output:
	// 1 error(s), 1 warning(s)
	// nan 2 1
	// magnitude 1 2
}

// Config gives the configuration to check the weights against, here one
// that contradicts the weights of the model directory, in place of its
// config.json.
func ExampleConfig() {
	config := []byte(`{"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 16, "intermediate_size": 24,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "vocab_size": 32}`)
	r, err := check.Model(context.Background(), "../testdata/models/llama", check.Config(config))
	if err != nil {
		panic(err)
	}
	for _, f := range r.Findings {
		fmt.Println(f)
	}
	// Output:
	// error: block model.layers: num_hidden_layers = 4, but the weights have 3 blocks model.layers.N
	// error: block model.layers: num_hidden_layers = 4, but no list in the weights has 4 entries (model.layers has 3 blocks)
}

// Progress reports the bytes of values read as the check goes, from the
// goroutine that called Model: here the last report.
func ExampleProgress() {
	var done, total uint64
	_, err := check.Model(context.Background(), "../testdata/models/llama", check.Progress(func(d, t uint64) { done, total = d, t }))
	if err != nil {
		panic(err)
	}
	fmt.Println(done == total, total > 0)
	// Output: true true
}
