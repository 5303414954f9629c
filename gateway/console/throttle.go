package console

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sign-in throttling: each client address may fail signInBurst admin-token
// sign-ins (or start that many provider sign-ins) at once, then one more
// per signInEvery. An address over its limit is refused with 429 before
// its token is even checked, so guessing the admin token costs
// signInEvery per guess.
const (
	signInBurst = 10
	signInEvery = 30 * time.Second
	// maxThrottled bounds the addresses remembered; past it, those whose
	// budget has refilled are forgotten (they are as good as new).
	maxThrottled = 10000
)

// throttle holds one token bucket per client address.
type throttle struct {
	mu      sync.Mutex
	sources map[string]*rate.Limiter
}

func newThrottle() *throttle {
	return &throttle{sources: map[string]*rate.Limiter{}}
}

// clientAddress is the address sign-ins are counted by: the connection's
// peer. X-Forwarded-For is not trusted: any client could set it to
// escape its limit. Behind a proxy every client shares the proxy's budget.
func clientAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// wait reports how long source must wait before its next attempt (0: it
// may try now), consuming nothing.
func (t *throttle) wait(source string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim := t.sources[source]
	if lim == nil {
		return 0
	}
	res := lim.ReserveN(now, 1)
	defer res.CancelAt(now)
	return res.DelayFrom(now)
}

// spend takes one attempt from source's budget (a failed sign-in, or a
// provider sign-in started).
func (t *throttle) spend(source string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim := t.sources[source]
	if lim == nil {
		if len(t.sources) >= maxThrottled {
			t.forgetRefilled(now)
		}
		lim = rate.NewLimiter(rate.Every(signInEvery), signInBurst)
		t.sources[source] = lim
	}
	lim.ReserveN(now, 1) // past the burst this only moves the next allowed time on
}

// forgetRefilled drops the addresses whose budget is full again; if every
// one is still limited (a flood from many addresses), it forgets them all
// rather than grow without bound: such a flood has a budget per address
// anyway.
func (t *throttle) forgetRefilled(now time.Time) {
	for source, lim := range t.sources {
		if lim.TokensAt(now) >= signInBurst {
			delete(t.sources, source)
		}
	}
	if len(t.sources) >= maxThrottled {
		clear(t.sources)
	}
}

// tooMany answers 429 on the sign-in page, with Retry-After, and logs the
// address (never a token).
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, source string, wait time.Duration, v signInView) {
	seconds := int(math.Ceil(wait.Seconds()))
	c.opts.Log.WarnContext(r.Context(), "console: sign-in throttled: too many attempts from one address", "source", source, "retry_after_seconds", seconds)
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	v.Message = "Too many sign-in attempts from your address. Wait " + strconv.Itoa(seconds) + " seconds, then try again."
	c.renderSignIn(w, r, http.StatusTooManyRequests, v)
}
