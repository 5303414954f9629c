package callpath

import (
	"crypto/rand"

	"github.com/oklog/ulid/v2"
)

// newULID mints a ULID from crypto/rand. ulid.Make would share one
// monotonic entropy source behind a mutex; crypto/rand needs no lock.
// Filled in place (not ulid.New, whose entropy io.Reader makes the ULID
// escape), it costs one allocation: the string.
func newULID() string {
	var id ulid.ULID
	// Now is within the 48-bit range until the year 10889.
	_ = id.SetTime(ulid.Now())
	// crypto/rand.Read never fails (it aborts the program instead).
	_, _ = rand.Read(id[6:])
	return id.String()
}
