//go:build !unix

package regular

import "os"

// nonBlock is 0 here: opening a FIFO does not block.
const nonBlock = 0

// setBlocking has nothing to do here.
func setBlocking(*os.File) error { return nil }
