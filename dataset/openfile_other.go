//go:build !unix

package dataset

// nonBlock is 0 where opening a FIFO does not block or the flag does not
// exist.
const nonBlock = 0
