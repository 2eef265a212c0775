package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/safetensors-go/safetensors/remote"
)

// headerFlags is the value of the repeatable --header flag.
type headerFlags []string

func (h *headerFlags) String() string { return strings.Join(*h, ", ") }

func (h *headerFlags) Set(v string) error {
	key, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(key) == "" {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	*h = append(*h, v)
	return nil
}

// requestHeaders are the --header flags of the command being run.
var requestHeaders headerFlags

// isURL reports whether name is an http or https URL.
func isURL(name string) bool {
	return strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://")
}

// remoteOptions returns the options for reading the URL name: the --header
// flags, and the Hugging Face token for the Hub.
func remoteOptions(name string) []remote.Option {
	var opts []remote.Option
	for _, h := range requestHeaders {
		k, v, _ := strings.Cut(h, ":")
		opts = append(opts, remote.RequestHeader(strings.TrimSpace(k), strings.TrimSpace(v)))
	}
	if token := os.Getenv("HF_TOKEN"); token != "" && isHub(name) {
		opts = append(opts, remote.RequestHeader("Authorization", "Bearer "+token))
	}
	return opts
}

// isHub reports whether the URL name is on the Hugging Face Hub: on
// huggingface.co or hf.co or their subdomains, or on the host of
// HF_ENDPOINT, as huggingface_hub sends its token.
func isHub(name string) bool {
	u, err := url.Parse(name)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if e, err := url.Parse(os.Getenv("HF_ENDPOINT")); err == nil && e.Host != "" {
		return u.Host == e.Host
	}
	for _, hub := range []string{"huggingface.co", "hf.co"} {
		if host == hub || strings.HasSuffix(host, "."+hub) {
			return true
		}
	}
	return false
}

// remoteHint returns the command's next step for err, or "".
func remoteHint(err error) string { return "" }
