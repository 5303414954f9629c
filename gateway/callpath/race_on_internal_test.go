//go:build race

package callpath

// raceEnabled: the race detector changes what escapes, so allocation
// counts are asserted only without it.
const raceEnabled = true
