package main

import (
	"errors"
	"fmt"
	"net/http"
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

// remoteHint returns the command's next step for err, when it is a
// request that a server refused for want of credentials (401
// Unauthorized, 403 Forbidden): what to set or pass, or, where a token was
// sent (HF_TOKEN to the Hub, or an Authorization --header), what to check.
// It returns "" for any other error.
func remoteHint(err error) string {
	var se *remote.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized && se.Code != http.StatusForbidden {
		return ""
	}
	hub := isHub(se.URL)
	switch {
	case hasAuthorizationHeader():
		return "check the token of the Authorization --header: the server refused it"
	case hub && os.Getenv("HF_TOKEN") != "":
		return "check the token in HF_TOKEN: it has no access to the repository (a gated repository's terms are accepted on its page)"
	case hub:
		return "set HF_TOKEN or pass --header 'Authorization: Bearer TOKEN'"
	}
	return "pass --header 'Authorization: Bearer TOKEN' (or the header the server wants)"
}

// hasAuthorizationHeader reports whether an Authorization header is among
// the --header flags.
func hasAuthorizationHeader() bool {
	for _, h := range requestHeaders {
		if k, _, _ := strings.Cut(h, ":"); strings.EqualFold(strings.TrimSpace(k), "Authorization") {
			return true
		}
	}
	return false
}
