// Package progress draws the progress of a long piece of work on a
// terminal: one line, redrawn in place at most ten times a second, with
// the bytes done and in all, the rate and the time left, erased at the
// end. It is the one progress display of the command, whatever reads the
// values (a conversion, a check, statistics, a quantization).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Interval is the least time between two drawings of the line, and the
// time before the first: work that ends sooner shows nothing.
const Interval = 100 * time.Millisecond

// maxLabel is the most characters of the label drawn, its end kept, so
// that the line fits a terminal of 80 columns and does not wrap (a
// wrapped line cannot be redrawn in place).
const maxLabel = 32

// A Meter draws the progress of work measured in bytes on one line of a
// terminal. Its methods are safe for concurrent use, and do nothing on a
// nil *Meter, which New returns for a writer that is not a terminal, so
// that callers need not test for one.
type Meter struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	now   func() time.Time
	start time.Time
	last  time.Time // of the last drawing, or start
	width int       // the length of the line on the terminal, 0 if none
	ended bool
}

// New returns a Meter that draws on w, behind label (a file's name), or
// nil when w is not a terminal (a file, a pipe, a buffer), so that output
// redirected or captured holds no progress.
func New(w io.Writer, label string) *Meter {
	if !IsTerminal(w) {
		return nil
	}
	return Force(w, label)
}

// Force returns a Meter that draws on w whatever w is: for tests, and for
// callers that know better than IsTerminal.
func Force(w io.Writer, label string) *Meter {
	return newMeter(w, label, time.Now)
}

func newMeter(w io.Writer, label string, now func() time.Time) *Meter {
	if n := len(label); n > maxLabel {
		label = "..." + label[n-maxLabel+3:]
	}
	t := now()
	return &Meter{w: w, label: label, now: now, start: t, last: t}
}

// IsTerminal reports whether w is a terminal: an *os.File of a character
// device.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Update records that done bytes of total are done and redraws the line
// if Interval has passed since it was last drawn (since New at first):
//
//	model.safetensors  1.2/4.0 GiB  30%  1.3 GiB/s  0:03 left
//
// The rate is the average since New, and the time left that of the bytes
// left at that rate. Updates after Done draw nothing.
func (m *Meter) Update(done, total uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.now()
	if m.ended || t.Sub(m.last) < Interval {
		return
	}
	m.last = t
	m.draw(line(m.label, done, total, t.Sub(m.start)))
}

// line returns the line that shows done bytes of total, elapsed after the
// start.
func line(label string, done, total uint64, elapsed time.Duration) string {
	done = min(done, total)
	const gib = 1 << 30
	pct := uint64(100)
	if total > 0 {
		pct = done * 100 / total
	}
	s := fmt.Sprintf("%s  %.1f/%.1f GiB  %d%%", label, float64(done)/gib, float64(total)/gib, pct)
	if done == 0 || elapsed <= 0 {
		return s
	}
	rate := float64(done) / elapsed.Seconds() // bytes a second
	left := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
	return s + fmt.Sprintf("  %.1f GiB/s  %s left", rate/gib, clock(left))
}

// clock formats d as m:ss, or h:mm:ss from an hour.
func clock(d time.Duration) string {
	s := int64(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// draw writes s over the line drawn before, padded to erase what is left
// of a longer one.
func (m *Meter) draw(s string) {
	pad := max(0, m.width-len(s))
	fmt.Fprintf(m.w, "\r%s%s", s, strings.Repeat(" ", pad))
	m.width = len(s)
}

// erase blanks the line and returns the cursor to its start.
func (m *Meter) erase() {
	if m.width > 0 {
		fmt.Fprintf(m.w, "\r%s\r", strings.Repeat(" ", m.width))
		m.width = 0
	}
}

// Clear erases the line, if one is drawn, for other output to take its
// place; the next Update draws it again.
func (m *Meter) Clear() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.erase()
}

// Done erases the line, if one is drawn, and ends the Meter: later calls
// draw nothing. Output that follows starts at the start of the line.
func (m *Meter) Done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.erase()
	m.ended = true
}

// Writer returns a writer that writes to w, which shares the terminal
// with the Meter (standard output), after erasing the line, so that the
// output and the progress do not mix; the next Update draws the line
// again below the output. On a nil *Meter it returns w.
func (m *Meter) Writer(w io.Writer) io.Writer {
	if m == nil {
		return w
	}
	return &clearWriter{m: m, w: w}
}

type clearWriter struct {
	m *Meter
	w io.Writer
}

func (c *clearWriter) Write(p []byte) (int, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.erase()
	return c.w.Write(p)
}
