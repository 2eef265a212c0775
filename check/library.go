package check

import (
	"strings"
)

// libraryFiles are the configuration files other than config.json that
// the libraries write beside a model's weights, which Model and
// Checkpoint read and check: peft's adapter_config.json, open_clip's
// open_clip_config.json, sentence-transformers' sentence_bert_config.json.
var libraryFiles = []string{"adapter_config.json", "open_clip_config.json", "sentence_bert_config.json"}

// checkLibraries checks the configuration files of the libraries other
// than transformers against the weights: files holds each file present
// by name, config.json included. It returns the keys checked, each
// written "file:key" for a file other than config.json, and the findings.
func checkLibraries(files map[string]map[string]any, infos []info, st structureResult) (checked []string, out []Finding) {
	return nil, nil
}

// dedupeConfig drops a configuration's finding about a block or tensor
// that a structure finding names too: the structure's says where the
// defect is, and one defect is reported once.
func dedupeConfig(fs []Finding) []Finding {
	named := map[string]bool{}
	for _, f := range fs {
		if f.Kind == KindStructure && f.Severity == Error {
			named[f.Block] = true
			named[f.Tensor] = true
		}
	}
	out := fs[:0]
	for _, f := range fs {
		if f.Kind == KindConfig && (f.Block != "" && named[f.Block] || f.Tensor != "" && named[f.Tensor] || lacksNamed(f, named)) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// lacksNamed reports whether a finding says a block lacks a tensor of a
// block a structure finding names.
func lacksNamed(f Finding, named map[string]bool) bool {
	rest, ok := strings.CutPrefix(f.Message, "lacks ")
	if !ok {
		return false
	}
	for b := range named {
		if b != "" && strings.HasPrefix(rest, b+".") {
			return true
		}
	}
	return false
}
