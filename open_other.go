//go:build !unix

package safetensors

import "os"

// openRegular opens the named file for reading, and refuses anything but a
// regular file. Here, unlike on Unix, opening does not block on a FIFO.
func openRegular(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return checkRegular(f, path)
}

// openRegularIn is openRegular of a file inside root.
func openRegularIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	return checkRegular(f, name)
}

// checkRegular returns f if it is a regular file; else it closes it and
// returns an error naming path.
func checkRegular(f *os.File, path string) (*os.File, error) {
	if err := isRegular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
