package remote_test

import (
	"fmt"
	"testing"

	"github.com/safetensors-go/safetensors/remote"
	"github.com/stretchr/testify/assert"
)

func TestIsURL(t *testing.T) {
	for name, want := range map[string]bool{
		"http://host/x": true, "https://host/x": true, "HTTPS://host/x": true, "Http://host": true,
		"hf://org/m": false, "model.safetensors": false, "./http://x": false, "": false, "://x": false,
	} {
		assert.Equal(t, want, remote.IsURL(name), name)
	}
}

func ExampleIsURL() {
	for _, name := range []string{
		"https://huggingface.co/org/model/resolve/main/model.safetensors",
		"models/llama/model.safetensors",
	} {
		fmt.Println(remote.IsURL(name))
	}
	// Output:
	// true
	// false
}
