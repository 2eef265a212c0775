package checkpoint

import (
	"sync"

	"github.com/safetensors-go/safetensors"
)

// An MXFP4 chunk needs the same groups of every row of its expert: a
// strided selection. From a mapped file, ReadSlice copies it. Through
// ReadAt (a file too large to map, a remote one), ReadSlice would read
// the gaps between the runs with them (runs up to 64 KiB apart are read
// together), the expert's whole span for each of its chunks, groups/width
// times its bytes; and reading the runs alone would be a request per row.
// So an expert of several chunks whose blocks are at most mxfp4MaxStage
// bytes is read once, with its scales, into a stage that its chunks share
// and the last of them releases: each byte of the file read once.

// mxfp4MaxStage bounds the bytes of an expert's blocks read into a stage.
// A stage lives while chunks of its expert are under way: two experts at
// most but for a window of the pipeline wider than an expert's chunks,
// and a few stages' memory is kept for the next experts.
const mxfp4MaxStage = 64 << 20

// mxfp4Stages are the stages of a conversion, by weight and expert.
type mxfp4Stages struct {
	mu   sync.Mutex
	live map[mxfp4Key]*mxfp4Stage
	free [][]byte // the memory of stages released, for new ones
}

type mxfp4Key struct {
	name   string
	expert uint64
}

// mxfp4Stage is an expert's blocks and scales, read once.
type mxfp4Stage struct {
	once           sync.Once
	blocks, scales []byte
	err            error
	mem            [2][]byte // the memory read into
	left           uint64    // its chunks that have not released it
}

// mxfp4Staged returns the stage of the expert of the chunk c of blocks v
// and scales s, read (under cv.ctx) by the first of its chunks, or nil
// where its chunk reads its selection itself: a mapped file, an expert of
// one chunk, or of more than mxfp4MaxStage bytes. The chunk calls
// release once it is done with it.
func (cv *converter) mxfp4Staged(c *dequantChunk, v, s safetensors.TensorInfo) (*mxfp4Stage, error) {
	rows, groups := v.Shape[1], v.Shape[2]
	span := rows * groups * 16 // no overflow: the tensor's size
	if c.perExpert < 2 || span > mxfp4MaxStage || cv.mapped(v.Name) {
		return nil, nil
	}
	st := &cv.plan.stages
	key := mxfp4Key{v.Name, c.m}
	st.mu.Lock()
	if st.live == nil {
		st.live = map[mxfp4Key]*mxfp4Stage{}
	}
	g := st.live[key]
	if g == nil {
		g = &mxfp4Stage{left: c.perExpert}
		for i := range g.mem {
			if n := len(st.free); n > 0 {
				g.mem[i], st.free = st.free[n-1], st.free[:n-1]
			}
		}
		st.live[key] = g
	}
	st.mu.Unlock()
	g.once.Do(func() {
		var t safetensors.Tensor
		first := c.m * rows * groups
		if t, g.err = cv.ck.TensorElements(cv.ctx, v.Name, first*16, first*16+span, g.mem[0]); g.err != nil {
			return
		}
		g.blocks = t.Data
		if t, g.err = cv.ck.TensorElements(cv.ctx, s.Name, first, first+rows*groups, g.mem[1]); g.err != nil {
			return
		}
		g.scales = t.Data
		g.mem = [2][]byte{g.blocks, g.scales}
	})
	if g.err != nil {
		return nil, g.err
	}
	return g, nil
}

// release tells the stage of the chunk c's expert that c is done with it:
// the last of its chunks gives its memory back.
func (cv *converter) release(c *dequantChunk, v safetensors.TensorInfo, g *mxfp4Stage) {
	st := &cv.plan.stages
	st.mu.Lock()
	defer st.mu.Unlock()
	if g.left--; g.left > 0 {
		return
	}
	delete(st.live, mxfp4Key{v.Name, c.m})
	for _, b := range g.mem {
		if b != nil && len(st.free) < 4 {
			st.free = append(st.free, b[:cap(b)])
		}
	}
}

// mapped reports whether the named tensor's file is mapped (or in
// memory): a local file that the Checkpoint does not read through ReadAt.
func (cv *converter) mapped(name string) bool {
	l, ok := cv.ck.find(name)
	if !ok {
		return false
	}
	_, local := onDisk(cv.ck.dir)
	return local && cv.ck.files[l.file].closer == nil
}
