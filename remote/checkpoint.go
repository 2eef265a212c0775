package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/safetensors-go/safetensors"
)

// The names under which transformers looks for a model's weights, in its
// order.
const (
	modelFile  = "model.safetensors"
	modelIndex = "model" + safetensors.IndexSuffix
)

// maxIndexSize bounds an index file, as safetensors.MaxHeaderSize bounds a
// header.
const maxIndexSize = safetensors.MaxHeaderSize

// OpenIndex opens a model's checkpoint over HTTP, as
// safetensors.OpenIndex opens one on disk, and gives the same reading API
// and the same checks (safetensors.NewSharded's). url is one of
//
//   - a sharded checkpoint's index, a URL whose path ends in .json, such as
//     https://huggingface.co/{repo}/resolve/{revision}/model.safetensors.index.json;
//   - a single safetensors file, a URL whose path ends in .safetensors,
//     which gives a Sharded of one shard;
//   - a model's base URL, such as https://huggingface.co/{repo}/resolve/{revision},
//     under which it looks, as transformers does, for model.safetensors and
//     then, if that is not found (404), for model.safetensors.index.json.
//
// It fetches the index, then the headers of the shards, whose URLs are the
// index's with the shard's file name in place of its own, eight at once
// (as safetensors.NewSharded opens them), each with one range request as
// Open makes. Each shard is a Reader from Open, pinned to the version its
// first request saw. ctx governs the checkpoint's later reads too.
//
// For a single file, the Sharded's Metadata is the file's, without the
// keys total_size and total_parameters, which an index reserves.
func OpenIndex(ctx context.Context, client *http.Client, rawURL string, opts ...Option) (*safetensors.Sharded, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = DefaultClient
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	switch {
	case strings.HasSuffix(u.Path, ".json"):
		return openSharded(ctx, client, u, cfg, opts)
	case strings.HasSuffix(u.Path, ".safetensors"):
		return openSingle(ctx, client, u, opts)
	}
	file := u.JoinPath(modelFile)
	s, err := openSingle(ctx, client, file, opts)
	if err == nil || !isNotFound(err) {
		return s, err
	}
	return openSharded(ctx, client, u.JoinPath(modelIndex), cfg, opts)
}

// notFound marks the error of a 404 Not Found answer.
type notFound struct{ error }

func (e notFound) Unwrap() error { return e.error }

// isNotFound reports whether err says that the object was not found.
func isNotFound(err error) bool {
	var nf notFound
	return errors.As(err, &nf)
}

// openSingle opens the file at u as a Sharded of one shard.
func openSingle(ctx context.Context, client *http.Client, u *url.URL, opts []Option) (*safetensors.Sharded, error) {
	f, err := Stat(ctx, client, u.String(), opts...)
	if err != nil {
		return nil, err
	}
	r, err := safetensors.NewReaderAt(f, f.Size(), f.cfg.readOpts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	name := path.Base(u.Path)
	index := struct {
		Metadata  map[string]string `json:"metadata,omitempty"`
		WeightMap map[string]string `json:"weight_map"`
	}{WeightMap: make(map[string]string, len(r.Header().Tensors))}
	for k, v := range r.Header().Metadata {
		if k != "total_size" && k != "total_parameters" {
			if index.Metadata == nil {
				index.Metadata = make(map[string]string)
			}
			index.Metadata[k] = v
		}
	}
	for _, t := range r.Header().Tensors {
		index.WeightMap[t.Name] = name
	}
	data, err := json.Marshal(index)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("safetensors: %s: %w", u, err)
	}
	return safetensors.NewSharded(u.String(), data, func(string) (*safetensors.Reader, error) { return r, nil })
}

// openSharded opens the sharded checkpoint whose index is at u.
func openSharded(ctx context.Context, client *http.Client, u *url.URL, cfg *config, opts []Option) (*safetensors.Sharded, error) {
	index, err := fetchIndex(ctx, client, u.String(), cfg)
	if err != nil {
		return nil, err
	}
	dir := *u
	dir.Path, dir.RawPath = path.Dir(u.Path), ""
	dir.RawQuery, dir.Fragment = "", ""
	open := func(shard string) (*safetensors.Reader, error) {
		f, err := Stat(ctx, client, dir.JoinPath(strings.Split(shard, "/")...).String(), opts...)
		if err != nil {
			return nil, err
		}
		return safetensors.NewReaderAt(f, f.Size(), cfg.readOpts...)
	}
	return safetensors.NewSharded(u.String(), index, open)
}

// fetchIndex GETs the index file at url, of at most maxIndexSize bytes.
func fetchIndex(ctx context.Context, client *http.Client, url string, cfg *config) ([]byte, error) {
	o := &object{client: client, url: url, cfg: cfg}
	var data []byte
	err := o.withRetries(ctx, func() error {
		what := "GET " + url
		x, err := o.send(ctx, 0, -1, what)
		if err != nil {
			return err
		}
		defer x.close()
		switch code := x.resp.StatusCode; {
		case code != http.StatusOK:
			return x.statusError()
		case x.resp.ContentLength > maxIndexSize:
			return fmt.Errorf("%w: %s: %d bytes, more than %d", safetensors.ErrInvalidIndex, url, x.resp.ContentLength, maxIndexSize)
		}
		data, err = io.ReadAll(io.LimitReader(x, maxIndexSize+1))
		if err != nil {
			return x.netError(ctx, err)
		}
		if len(data) > maxIndexSize {
			return fmt.Errorf("%w: %s: more than %d bytes", safetensors.ErrInvalidIndex, url, maxIndexSize)
		}
		return nil
	})
	return data, err
}
