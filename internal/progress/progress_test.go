package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a time that a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFake() (*fakeClock, func() time.Time) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	return c, c.now
}

const gib = 1 << 30

// TestMeterFormat: the line's parts, the rate and the time left, drawn
// over the last line with \r and padded to erase a longer one.
func TestMeterFormat(t *testing.T) {
	var out bytes.Buffer
	c, now := newFake()
	m := newMeter(&out, "model.safetensors", now)
	c.add(2 * time.Second)
	m.Update(1*gib, 4*gib)
	assert.Equal(t, "\rmodel.safetensors  1.0/4.0 GiB  25%  0.5 GiB/s  0:06 left", out.String())
	out.Reset()
	c.add(4 * time.Second)
	m.Update(4*gib, 4*gib)
	assert.Equal(t, "\rmodel.safetensors  4.0/4.0 GiB  100%  0.7 GiB/s  0:00 left", out.String())
	out.Reset()
	c.add(time.Second)
	m.Update(0, 4*gib) // nothing done: no rate, and the line is shorter
	want := "model.safetensors  0.0/4.0 GiB  0%"
	assert.Equal(t, "\r"+want+strings.Repeat(" ", len("model.safetensors  4.0/4.0 GiB  100%  0.7 GiB/s  0:00 left")-len(want)), out.String())
}

func TestLine(t *testing.T) {
	for _, c := range []struct {
		done, total uint64
		elapsed     time.Duration
		want        string
	}{
		{0, 0, time.Second, "x  0.0/0.0 GiB  100%"},
		{gib / 2, 10 * gib, 10 * time.Second, "x  0.5/10.0 GiB  5%  0.1 GiB/s  3:10 left"},
		{gib, 100 * gib, 10 * time.Second, "x  1.0/100.0 GiB  1%  0.1 GiB/s  16:30 left"},
		{gib, 1000 * gib, 10 * time.Second, "x  1.0/1000.0 GiB  0%  0.1 GiB/s  2:46:30 left"},
		{5 * gib, 4 * gib, time.Second, "x  4.0/4.0 GiB  100%  4.0 GiB/s  0:00 left"}, // done beyond total
	} {
		assert.Equal(t, c.want, line("x", c.done, c.total, c.elapsed))
	}
}

// TestMeterRate: the line is drawn at most once an Interval, and not in
// the first Interval.
func TestMeterRate(t *testing.T) {
	var out bytes.Buffer
	c, now := newFake()
	m := newMeter(&out, "x", now)
	draws := 0
	for i := range 100 { // 10 ms apart: a second in all
		c.add(10 * time.Millisecond)
		before := out.Len()
		m.Update(uint64(i+1)*gib/100, gib)
		if out.Len() != before {
			draws++
		}
	}
	assert.Equal(t, 10, draws)
	out.Reset()
	m = newMeter(&out, "x", now)
	c.add(Interval - 1)
	m.Update(gib, gib)
	assert.Empty(t, out.String(), "work that ends within an Interval shows nothing")
	m.Done()
	assert.Empty(t, out.String())
}

// TestMeterDone: Done erases the line drawn and nothing is drawn after it.
func TestMeterDone(t *testing.T) {
	var out bytes.Buffer
	c, now := newFake()
	m := newMeter(&out, "x", now)
	c.add(time.Second)
	m.Update(gib, 2*gib)
	drawn := out.String()
	out.Reset()
	m.Done()
	width := len(drawn) - 1
	assert.Equal(t, "\r"+strings.Repeat(" ", width)+"\r", out.String())
	out.Reset()
	c.add(time.Second)
	m.Update(2*gib, 2*gib)
	m.Done()
	m.Clear()
	assert.Empty(t, out.String())
}

// TestMeterWriter: output through Writer erases the line first; the next
// Update draws it again.
func TestMeterWriter(t *testing.T) {
	var out bytes.Buffer
	c, now := newFake()
	m := newMeter(&out, "x", now)
	w := m.Writer(&out)
	_, err := w.Write([]byte("a\n"))
	require.NoError(t, err)
	assert.Equal(t, "a\n", out.String(), "no line drawn: nothing to erase")
	out.Reset()
	c.add(time.Second)
	m.Update(gib, 2*gib)
	line := out.String()
	out.Reset()
	_, err = w.Write([]byte("b\n"))
	require.NoError(t, err)
	assert.Equal(t, "\r"+strings.Repeat(" ", len(line)-1)+"\rb\n", out.String())
	out.Reset()
	c.add(time.Second)
	m.Update(2*gib, 4*gib) // the same line: the same rate, the same part done
	assert.Equal(t, strings.NewReplacer("1.0/2.0", "2.0/4.0", "0:01", "0:02").Replace(line), out.String(), "drawn anew, nothing to pad")
}

func TestLabelCut(t *testing.T) {
	var out bytes.Buffer
	c, now := newFake()
	long := strings.Repeat("d/", 30) + "model.safetensors"
	m := newMeter(&out, long, now)
	c.add(time.Second)
	m.Update(0, gib)
	assert.Equal(t, "\r..."+long[len(long)-maxLabel+3:]+"  0.0/1.0 GiB  0%", out.String())
}

// TestNil: New gives nil for what is not a terminal; a nil Meter does
// nothing.
func TestNil(t *testing.T) {
	var out bytes.Buffer
	assert.Nil(t, New(&out, "x"), "a buffer")
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	assert.Nil(t, New(f, "x"), "a regular file")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.Nil(t, New(w, "x"), "a pipe")
	assert.False(t, IsTerminal(nil))
	var m *Meter
	m.Update(1, 2)
	m.Clear()
	m.Done()
	assert.Equal(t, &out, m.Writer(&out))
}

// TestMeterConcurrent: updates from several goroutines, with output
// through Writer, under -race.
func TestMeterConcurrent(t *testing.T) {
	var out bytes.Buffer
	m := Force(&out, "x")
	w := m.Writer(&out)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				m.Update(uint64(i), 1000)
				if i%100 == 0 {
					_, _ = w.Write([]byte{byte('a' + g)})
				}
			}
		}()
	}
	wg.Wait()
	m.Done()
	assert.Equal(t, 40, strings.Count(out.String(), "a")+strings.Count(out.String(), "b")+strings.Count(out.String(), "c")+strings.Count(out.String(), "d"))
}
