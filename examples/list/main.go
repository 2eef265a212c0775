// Command list prints the tensors of a safetensors file: name, dtype, shape,
// size and offsets, in file order, with the metadata and totals.
//
//	go run ./examples/list testdata/conformance/valid/typical_291.safetensors
//
// It opens the file with safetensors.Open, which checks the whole file as the
// reference does but reads only the header, so it lists a file of any size
// at once.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/safetensors-go/safetensors"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: list FILE")
		os.Exit(2)
	}
	if err := list(os.Stdout, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// list writes the listing of the named file to w.
func list(w io.Writer, path string) error {
	// Open maps the file and reads only its header; no tensor byte is read.
	r, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	h := r.Header()

	fmt.Fprintf(w, "%s: %d tensors, %d bytes of data after a %d-byte header\n", path, len(h.Tensors), h.DataLen(), h.Len)
	if h.Metadata != nil {
		keys := make([]string, 0, len(h.Metadata))
		for k := range h.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "metadata %q: %q\n", k, h.Metadata[k])
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDTYPE\tSHAPE\tBYTES\tOFFSETS")
	bytesByDType := map[safetensors.DType]uint64{}
	for _, t := range h.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		size := t.DataOffsets[1] - t.DataOffsets[0]
		bytesByDType[t.DType] += size
		fmt.Fprintf(tw, "%s\t%v\t[%s]\t%d\t[%d, %d)\n", t.Name, t.DType, strings.Join(dims, ", "), size, t.DataOffsets[0], t.DataOffsets[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	dtypes := make([]safetensors.DType, 0, len(bytesByDType))
	for d := range bytesByDType {
		dtypes = append(dtypes, d)
	}
	sort.Slice(dtypes, func(i, j int) bool { return dtypes[i] > dtypes[j] })
	for _, d := range dtypes {
		fmt.Fprintf(w, "%v: %d bytes\n", d, bytesByDType[d])
	}
	return nil
}
