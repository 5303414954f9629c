package gateway

import (
	"crypto/rand"

	"github.com/oklog/ulid/v2"
)

// newULID mints a ULID from crypto/rand. ulid.Make would share one
// monotonic entropy source behind a mutex; crypto/rand needs no lock.
func newULID() string {
	return ulid.MustNew(ulid.Now(), rand.Reader).String()
}
