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
	if err := isRegular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openRegularIn is openRegular of a file inside root.
func openRegularIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	if err := isRegular(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
