package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/remote"
)

// remoteHelp is the part of a command's help about URLs.
const remoteHelp = `

A FILE may be an http:// or https:// URL: of a file (ending in .safetensors),
of a checkpoint's index (ending in .json), or of a model's base, such as
https://huggingface.co/REPO/resolve/main, under which model.safetensors and
then model.safetensors.index.json are looked for. Only the headers and the
tensors needed are read, with range requests, each checked and pinned to the
version first seen; a request fails after 30 s without progress, never
because a read is long. The token in HF_TOKEN goes to huggingface.co (or to
the host of HF_ENDPOINT) as "Authorization: Bearer TOKEN"; --header sends any
header to every URL.`

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

// addRemoteFlags adds the flags about URLs to fs, and starts the command
// with none given.
func addRemoteFlags(fs *flag.FlagSet) {
	requestHeaders = nil
	fs.Var(&requestHeaders, "header", "send `'Name: value'` with every HTTP request (repeatable), such as 'Authorization: Bearer TOKEN'")
}

// isURL reports whether name is an http or https URL.
func isURL(name string) bool {
	return strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://")
}

// isCheckpointURL reports whether the URL name is that of a checkpoint (an
// index, or a model's base) rather than of one file.
func isCheckpointURL(name string) bool {
	u, err := url.Parse(name)
	return err == nil && !strings.HasSuffix(u.Path, ".safetensors")
}

// remoteOptions returns the options for reading the URL name: the --header
// flags, and the Hugging Face token for the Hub.
func remoteOptions(name string) []remote.Option {
	var opts []remote.Option
	for _, h := range requestHeaders {
		k, v, _ := strings.Cut(h, ":")
		opts = append(opts, remote.Header(strings.TrimSpace(k), strings.TrimSpace(v)))
	}
	if token := os.Getenv("HF_TOKEN"); token != "" && isHub(name) {
		opts = append(opts, remote.Header("Authorization", "Bearer "+token))
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

// checkpointOptions returns the options for opening name: for a URL, the
// --header flags and the Hugging Face token for the Hub.
func checkpointOptions(name string) []checkpoint.Option {
	if !isURL(name) {
		return nil
	}
	return []checkpoint.Option{checkpoint.RemoteOptions(remoteOptions(name)...)}
}
