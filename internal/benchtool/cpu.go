package benchtool

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used: the
// in-process servers and the load generator together.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
