module github.com/safetensors-go/safetensors/bench

go 1.24

require (
	github.com/safetensors-go/safetensors v0.0.0
	github.com/x448/float16 v0.8.4
)

replace github.com/safetensors-go/safetensors => ../
