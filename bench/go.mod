module github.com/safetensors-go/safetensors/bench

go 1.24

require github.com/safetensors-go/safetensors v0.0.0

replace github.com/safetensors-go/safetensors => ../
