package checkpoint

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/safetensors-go/safetensors/internal/hfindex"
	"github.com/safetensors-go/safetensors/internal/regular"
)

// commit completes the checkpoint for Close. The directory holds a
// complete checkpoint, the old one or the new one, at every instant:
//
//   - The new shards are written and synced under temporary names.
//   - A single shard is renamed to base.safetensors, atomically replacing an
//     old one; loaders look for that file before an index.
//   - Shards whose names no file in the directory has are renamed into
//     place, where the old index does not look, and the index is written
//     over the old one atomically: the commit point.
//   - When a shard's name is taken, as when a checkpoint is saved again with
//     as many shards, renaming over the old shard would break the old
//     checkpoint while its index still names it. The new index is written
//     first with the shards' temporary names, which commits the new
//     checkpoint as they are; then each shard gets a second, hard link
//     under its final name, renamed over the old shard that no index uses
//     any more, and the index is rewritten with the final names, atomically
//     again, before the temporary names are removed. Where hard links are
//     not supported, the shards keep the temporary names the index gives.
//   - Last, the files of the old checkpoint that the new one does not use
//     are removed: the shards the old index named, those named like this
//     checkpoint's shards (base-NNNNN-of-NNNNN.safetensors), a
//     base.safetensors under a new index, the old index under a new single
//     file.
func (w *Writer) commit() error {
	for _, s := range w.shards {
		if err := s.w.Close(); err != nil {
			w.Abort()
			return err
		}
		if err := s.f.Flush(); err != nil {
			w.Abort()
			return err
		}
	}
	indexPath := filepath.Join(w.dir, w.indexName)
	old := oldShards(indexPath)
	var keep []string
	if w.index == nil {
		// One shard, base.safetensors, and no index.
		if err := w.shards[0].f.Rename(); err != nil {
			return err
		}
		atomicfile.SyncDir(w.dir)
		keep = w.files
		if err := atomicfile.Remove(indexPath); err == nil {
			atomicfile.SyncDir(w.dir)
		}
	} else {
		var err error
		if keep, err = w.commitSharded(indexPath); err != nil {
			return err
		}
	}
	w.removeOld(old, keep)
	return nil
}

// commitSharded puts the shards and the index in place, and returns the
// file names the index gives the shards.
func (w *Writer) commitSharded(indexPath string) ([]string, error) {
	taken := false
	for _, file := range w.files {
		if _, err := os.Lstat(filepath.Join(w.dir, file)); !os.IsNotExist(err) {
			taken = true
			break
		}
	}
	if !taken {
		for i, s := range w.shards {
			if err := s.f.Rename(); err != nil {
				w.Abort()
				w.removeAll(w.files[:i])
				return nil, err
			}
		}
		atomicfile.SyncDir(w.dir)
		if err := writeIndex(indexPath, w.index); err != nil {
			w.removeAll(w.files)
			return nil, err
		}
		return w.files, nil
	}

	staged := make([]string, len(w.shards))
	for i, s := range w.shards {
		staged[i] = filepath.Base(s.f.Name())
	}
	weightMap := make(map[string]string, len(w.where))
	for name, i := range w.where {
		weightMap[name] = staged[i]
	}
	atomicfile.SyncDir(w.dir)
	if err := writeIndex(indexPath, hfindex.Append(nil, w.params, w.total, weightMap)); err != nil {
		w.Abort()
		return nil, err
	}
	for _, s := range w.shards {
		s.f.Keep()
	}
	// The new checkpoint is in place; what follows only renames it, and a
	// failure leaves it under the staged names.
	for i, file := range staged {
		final := filepath.Join(w.dir, w.files[i])
		link := atomicfile.TempName(final)
		if err := atomicfile.Link(filepath.Join(w.dir, file), link); err != nil {
			return staged, nil
		}
		if err := atomicfile.Rename(link, final); err != nil {
			atomicfile.Remove(link)
			return staged, nil
		}
	}
	atomicfile.SyncDir(w.dir)
	if err := writeIndex(indexPath, w.index); err != nil {
		return staged, nil
	}
	w.removeAll(staged)
	return w.files, nil
}

// writeIndex writes data to the index file at path atomically.
func writeIndex(path string, data []byte) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// removeAll removes the named files of the directory, as far as it can.
func (w *Writer) removeAll(files []string) {
	for _, file := range files {
		atomicfile.Remove(filepath.Join(w.dir, file))
	}
	atomicfile.SyncDir(w.dir)
}

// oldShards returns the file names of the shards that the index at path
// names, if it is one that can be read; files in subdirectories are left
// out, which removing could lead out of the directory through a link, and
// so are names that no shard has (a safetensors file, or a writer's
// temporary file, which an index lists where hard links fail), so that an
// index naming config.json does not make a save remove it.
func oldShards(path string) []string {
	f, err := regular.Open(regular.OpenFile, path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var index struct {
		WeightMap map[string]any `json:"weight_map"`
	}
	if err := json.NewDecoder(io.LimitReader(f, MaxFileSize)).Decode(&index); err != nil {
		return nil
	}
	var files []string
	for _, v := range index.WeightMap {
		if file, ok := v.(string); ok && file != "" && file != "." && file != ".." && !strings.ContainsAny(file, `/\`) && shardLike(file) {
			files = append(files, file)
		}
	}
	return files
}

// shardLike reports whether file may be a shard: a safetensors file, or a
// writer's temporary file.
func shardLike(file string) bool {
	temp, _ := filepath.Match(safetensors.TempPattern, file)
	return strings.HasSuffix(file, ".safetensors") || temp
}

// removeOld removes the files of an earlier checkpoint that the new one,
// whose shards are keep, does not use: old, the shards the old index named;
// the files named like this checkpoint's shards; and base.safetensors when
// the new checkpoint has an index.
func (w *Writer) removeOld(old, keep []string) {
	kept := make(map[string]bool, len(keep)+1)
	for _, file := range keep {
		kept[file] = true
	}
	kept[w.indexName] = true
	drop := make(map[string]bool)
	for _, file := range old {
		drop[file] = true
	}
	if w.index != nil {
		drop[w.stem+".safetensors"] = true
	}
	if entries, err := os.ReadDir(w.dir); err == nil {
		for _, e := range entries {
			if isShardName(e.Name(), w.stem) {
				drop[e.Name()] = true
			}
		}
	}
	removed := false
	for file := range drop {
		if !kept[file] && atomicfile.Remove(filepath.Join(w.dir, file)) == nil {
			removed = true
		}
	}
	if removed {
		atomicfile.SyncDir(w.dir)
	}
}

// isShardName reports whether name is that of a shard of a checkpoint
// whose files' names start with stem (the base name, and the variant):
// model-00001-of-00003.safetensors, model.fp16-00001-of-00003.safetensors.
func isShardName(name, stem string) bool {
	rest, ok := strings.CutPrefix(name, stem+"-")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".safetensors")
	return ok && isShardSuffix(rest)
}
