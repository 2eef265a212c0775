package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// pipeline lays out a small diffusers pipeline in dir, as
// DiffusionPipeline.save_pretrained does: model_index.json, a folder per
// component, and a config.json beside the weights of each model.
func pipeline(dir string) error {
	files := map[string]string{
		"model_index.json":                `{"_class_name": "StableDiffusionPipeline", "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"], "scheduler": ["diffusers", "PNDMScheduler"]}`,
		"unet/config.json":                `{"_class_name": "UNet2DConditionModel"}`,
		"vae/config.json":                 `{"_class_name": "AutoencoderKL"}`,
		"scheduler/scheduler_config.json": `{"_class_name": "PNDMScheduler"}`,
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	for _, part := range []string{"unet", "vae"} {
		t := safetensors.Tensor{Name: "conv_in.weight", DType: safetensors.F32, Shape: []uint64{2}, Data: make([]byte, 8)}
		for _, variant := range []string{"", "fp16"} {
			opts := []checkpoint.Option{checkpoint.BaseName("diffusion_pytorch_model")}
			if variant != "" {
				opts = append(opts, checkpoint.Variant(variant))
			}
			if err := checkpoint.Write(filepath.Join(dir, part), []safetensors.Tensor{t}, opts...); err != nil {
				return err
			}
		}
	}
	return nil
}

// A diffusers pipeline opens as a model of several parts, its components
// that hold weights; the scheduler holds none. Its tensors are named
// behind their part.
func ExampleCheckpoint_Parts() {
	dir, err := os.MkdirTemp("", "pipeline")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := pipeline(dir); err != nil {
		log.Fatal(err)
	}
	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	fmt.Println(ckpt.Names())
	for _, part := range ckpt.Parts() {
		config, err := part.ReadFile(context.Background(), "config.json")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(part.Part(), part.Files(), string(config))
	}
	// Output:
	// [unet/conv_in.weight vae/conv_in.weight]
	// unet [diffusion_pytorch_model.safetensors] {"_class_name": "UNet2DConditionModel"}
	// vae [diffusion_pytorch_model.safetensors] {"_class_name": "AutoencoderKL"}
}

// Variant reads the files of a variant, as from_pretrained(variant="fp16")
// does; without it, the files of no variant are read.
func ExampleVariant() {
	dir, err := os.MkdirTemp("", "pipeline")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := pipeline(dir); err != nil {
		log.Fatal(err)
	}
	ckpt, err := checkpoint.Open(context.Background(), dir, checkpoint.Variant("fp16"))
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	fmt.Println(ckpt.Variant(), ckpt.Files())
	// Output:
	// fp16 [unet/diffusion_pytorch_model.fp16.safetensors vae/diffusion_pytorch_model.fp16.safetensors]
}

// Load reads a whole model into memory in one call, as Python's load_file
// does for one file: here a model of several parts, whose tensors are
// named behind their part.
func ExampleLoad() {
	dir, err := os.MkdirTemp("", "pipeline")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := pipeline(dir); err != nil {
		log.Fatal(err)
	}
	tensors, metadata, err := checkpoint.Load(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	t := tensors["vae/conv_in.weight"]
	fmt.Println(len(tensors), t.DType, t.Shape, metadata)
	// Output:
	// 2 F32 [2] map[]
}

// Convert casts a model's float tensors, here a sharded checkpoint's, into
// a new folder, whose index it rewrites; a file would give a file.
func ExampleConvert() {
	dir, err := os.MkdirTemp("", "convert")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "f32")
	tensors := []safetensors.Tensor{
		{Name: "a", DType: safetensors.F32, Shape: []uint64{2}, Data: make([]byte, 8)},
		{Name: "b", DType: safetensors.F32, Shape: []uint64{2}, Data: make([]byte, 8)},
		{Name: "ids", DType: safetensors.I64, Shape: []uint64{1}, Data: make([]byte, 8)},
	}
	if err := checkpoint.Write(src, tensors, checkpoint.MaxShardSize(8)); err != nil {
		log.Fatal(err)
	}
	c, err := checkpoint.Convert(context.Background(), src, filepath.Join(dir, "bf16"), safetensors.BF16)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d of %d tensors converted, in %v\n", c.Converted, c.Tensors, c.Files)
	// Output:
	// 2 of 3 tensors converted, in [model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors]
}

// Shards asks for a number of shards rather than a largest size: the
// tensors, kept whole and in order, are split so that the largest shard is
// as small as it can be.
func ExampleShards() {
	dir, err := os.MkdirTemp("", "shards")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for i, size := range []int{40, 10, 10, 20, 20} {
		tensors = append(tensors, safetensors.Tensor{
			Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.U8, Shape: []uint64{uint64(size)}, Data: make([]byte, size),
		})
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.Shards(3)); err != nil {
		log.Fatal(err)
	}
	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	for _, f := range ckpt.Files() {
		h, err := ckpt.Header(f)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f, len(h.Tensors), "tensors,", h.DataLen(), "bytes")
	}
	// Output:
	// model-00001-of-00003.safetensors 1 tensors, 40 bytes
	// model-00002-of-00003.safetensors 3 tensors, 40 bytes
	// model-00003-of-00003.safetensors 1 tensors, 20 bytes
}

// One tensor-parallel rank's rows of each weight of a sharded checkpoint,
// read into a buffer the caller owns and reuses: the same call reads a
// checkpoint on disk or over HTTP, and allocates nothing from files on
// disk.
func ExampleCheckpoint_ReadSlice() {
	dir, err := os.MkdirTemp("", "ranks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for i := range 2 {
		w := safetensors.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.U8, Shape: []uint64{4, 3}, Data: make([]byte, 12)}
		for j := range w.Data {
			w.Data[j] = byte(10*i + j)
		}
		tensors = append(tensors, w)
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.Shards(2)); err != nil {
		log.Fatal(err)
	}
	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()

	// Rank 1 of 2 takes rows 2 and 3: w[2:4].
	rank := []safetensors.Selector{safetensors.Range(2, 4)}
	buf := make([]byte, 6)
	for _, name := range ckpt.Names() {
		n, err := ckpt.ReadSlice(context.Background(), name, buf, rank...)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(name, buf[:n])
	}
	// Output:
	// layers.0.weight [6 7 8 9 10 11]
	// layers.1.weight [16 17 18 19 20 21]
}
