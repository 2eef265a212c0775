package safetensors

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
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
func (w *ShardedWriter) commit() error {
	for _, fw := range w.shards {
		if err := fw.Writer.Close(); err != nil {
			w.Abort()
			return err
		}
		if err := fw.f.flush(); err != nil {
			w.Abort()
			return err
		}
	}
	indexPath := filepath.Join(w.dir, w.base+IndexSuffix)
	old := oldShards(indexPath)
	var keep []string
	if w.index == nil {
		// One shard, base.safetensors, and no index.
		if err := w.shards[0].f.rename(); err != nil {
			return err
		}
		syncDir(w.dir)
		keep = w.files
		if err := removeFile(indexPath); err == nil {
			syncDir(w.dir)
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
func (w *ShardedWriter) commitSharded(indexPath string) ([]string, error) {
	taken := false
	for _, file := range w.files {
		if _, err := os.Lstat(filepath.Join(w.dir, file)); !os.IsNotExist(err) {
			taken = true
			break
		}
	}
	if !taken {
		for i, fw := range w.shards {
			if err := fw.f.rename(); err != nil {
				w.Abort()
				w.removeAll(w.files[:i])
				return nil, err
			}
		}
		syncDir(w.dir)
		if err := writeIndex(indexPath, w.index); err != nil {
			w.removeAll(w.files)
			return nil, err
		}
		return w.files, nil
	}

	staged := make([]string, len(w.shards))
	for i, fw := range w.shards {
		staged[i] = filepath.Base(fw.f.f.Name())
	}
	weightMap := make(map[string]string, len(w.where))
	for name, i := range w.where {
		weightMap[name] = staged[i]
	}
	syncDir(w.dir)
	if err := writeIndex(indexPath, appendIndex(nil, w.params, w.total, weightMap)); err != nil {
		w.Abort()
		return nil, err
	}
	for _, fw := range w.shards {
		fw.f.done = true
	}
	// The new checkpoint is in place; what follows only renames it, and a
	// failure leaves it under the staged names.
	for i, file := range staged {
		final := filepath.Join(w.dir, w.files[i])
		link := tempName(final)
		if err := linkFile(filepath.Join(w.dir, file), link); err != nil {
			return staged, nil
		}
		if err := renameFile(link, final); err != nil {
			removeFile(link)
			return staged, nil
		}
	}
	syncDir(w.dir)
	if err := writeIndex(indexPath, w.index); err != nil {
		return staged, nil
	}
	w.removeAll(staged)
	return w.files, nil
}

// writeIndex writes data to the index file at path atomically.
func writeIndex(path string, data []byte) error {
	f, err := createAtomic(path)
	if err != nil {
		return err
	}
	if _, err := f.f.Write(data); err != nil {
		f.abort()
		return err
	}
	return f.commit()
}

// removeAll removes the named files of the directory, as far as it can.
func (w *ShardedWriter) removeAll(files []string) {
	for _, file := range files {
		removeFile(filepath.Join(w.dir, file))
	}
	syncDir(w.dir)
}

// oldShards returns the file names of the shards that the index at path
// names, if it is one that can be read; files in subdirectories are left
// out, which removing could lead out of the directory through a link, and
// so are names that no shard has (a safetensors file, or a writer's
// temporary file, which an index lists where hard links fail), so that an
// index naming config.json does not make a save remove it.
func oldShards(path string) []string {
	f, err := openRegular(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var index struct {
		WeightMap map[string]any `json:"weight_map"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxIndexSize)).Decode(&index); err != nil {
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
	temp, _ := filepath.Match(TempPattern, file)
	return strings.HasSuffix(file, ".safetensors") || temp
}

// removeOld removes the files of an earlier checkpoint that the new one,
// whose shards are keep, does not use: old, the shards the old index named;
// the files named like this checkpoint's shards; and base.safetensors when
// the new checkpoint has an index.
func (w *ShardedWriter) removeOld(old, keep []string) {
	kept := make(map[string]bool, len(keep)+1)
	for _, file := range keep {
		kept[file] = true
	}
	kept[w.base+IndexSuffix] = true
	drop := make(map[string]bool)
	for _, file := range old {
		drop[file] = true
	}
	if w.index != nil {
		drop[w.base+".safetensors"] = true
	}
	if entries, err := os.ReadDir(w.dir); err == nil {
		for _, e := range entries {
			if isShardName(e.Name(), w.base) {
				drop[e.Name()] = true
			}
		}
	}
	removed := false
	for file := range drop {
		if !kept[file] && removeFile(filepath.Join(w.dir, file)) == nil {
			removed = true
		}
	}
	if removed {
		syncDir(w.dir)
	}
}

// isShardName reports whether name is that of a shard of a checkpoint with
// the given base name: base-00001-of-00003.safetensors.
func isShardName(name, base string) bool {
	rest, ok := strings.CutPrefix(name, base+"-")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".safetensors")
	digits := func(s string) bool {
		return len(s) == 5 && strings.Trim(s, "0123456789") == ""
	}
	i, of, ok2 := strings.Cut(rest, "-of-")
	return ok && ok2 && digits(i) && digits(of)
}
