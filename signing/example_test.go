package signing_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors/signing"
)

// Sign a model's folder as 'model_signing sign key' does, and verify it
// as 'model_signing verify key' does.
func Example() {
	dir, _ := os.MkdirTemp("", "model")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{}`), 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weights"), 0o644)

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sig, manifest, err := signing.Sign(context.Background(), dir, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("signed:", manifest.Paths())

	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	v, err := signing.KeyVerifier(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil {
		fmt.Println(err)
		return
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("Weights"), 0o644)
	r, err := signing.Verify(context.Background(), dir, sig, v)
	if err != nil {
		fmt.Println(err) // a signature that cannot be trusted
		return
	}
	for _, f := range r.Files {
		fmt.Println(f.Name, f.Status)
	}
	// Output:
	// signed: [config.json model.safetensors]
	// config.json ok
	// model.safetensors differs
}
