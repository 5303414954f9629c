// Package pgtest gives tests a real PostgreSQL: the shared server of the
// machine (127.0.0.1:5432, database test, trust auth) with a schema of the
// test's own, or a private server (initdb + postgres in a temporary
// directory, on a free port) that a test may kill and restart.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SharedUsers are tried in order on the shared server (trust auth).
var SharedUsers = []string{"root", "postgres"}

const sharedHostPort = "127.0.0.1:5432"

var (
	sharedOnce sync.Once
	sharedURL  string
	sharedErr  error
)

// URL returns the connection URL of a PostgreSQL for tests that do not kill
// it: the shared server when it answers, else a private server started for
// the test. Tests isolate themselves with Schema and never drop anything
// they did not create.
func URL(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() { sharedURL, sharedErr = probeShared() })
	if sharedErr == nil {
		return sharedURL
	}
	t.Logf("shared PostgreSQL unavailable (%v); starting a private one", sharedErr)
	return Start(t).URL
}

// probeShared finds a user the shared server lets in.
func probeShared() (string, error) {
	var errs []error
	for _, u := range SharedUsers {
		url := "postgres://" + u + "@" + sharedHostPort + "/test?sslmode=disable"
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return url, nil
		}
		errs = append(errs, fmt.Errorf("user %s: %w", u, err))
	}
	return "", errors.Join(errs...)
}

// Schema creates a schema with a random name on the database at url and
// drops it (CASCADE) when the test ends. CREATE SCHEMA without IF NOT
// EXISTS proves the name was new, so the drop removes only what the test
// created.
func Schema(t testing.TB, url string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "gwtest_" + hex.EncodeToString(b)
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(t.Context(), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// Server is a private PostgreSQL server: its own data directory and port.
type Server struct {
	URL  string
	Port int
	Dir  string // the data directory

	bin  string
	cred *syscall.Credential // set when running as root: postgres refuses root

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start initialises a cluster in a temporary directory and starts postgres
// on a free loopback port; the server is killed and its directory removed
// when the test ends. The test is skipped only when PostgreSQL's binaries
// (or, as root, a postgres user) are missing.
func Start(t testing.TB) *Server {
	t.Helper()
	return startWith(t, freePort)
}

// startWith is Start with the first port from port (launchOn).
func startWith(t testing.TB, port func() (int, error)) *Server {
	t.Helper()
	if _, err := BinDir(); err != nil {
		t.Skip(err)
	}
	if os.Geteuid() == 0 {
		if _, err := postgresUser(); err != nil {
			t.Skip(err)
		}
	}
	root, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	s, err := launchOn(root, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Launch is Start for programs (the chaos run): it initialises a cluster
// under dir (which must exist) and starts postgres on a free loopback
// port. The caller kills it. As root (initdb and postgres refuse to run as
// root) both run as the "postgres" user, and dir is handed to that user.
func Launch(dir string) (*Server, error) {
	return launchOn(dir, freePort)
}

// launchOn is Launch with the first port from port. A port that is taken
// by the time postgres binds it (freePort only saw it free: another
// process on a busy machine may take it meanwhile) is left for a new free
// one, a few times.
func launchOn(dir string, port func() (int, error)) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: filepath.Join(dir, "data"), bin: bin}
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			return nil, err
		}
		s.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	initdb := s.command("initdb", "-D", s.Dir, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale", "C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	const attempts = 5
	for attempt := 1; ; attempt++ {
		if s.Port, err = port(); err != nil {
			return nil, err
		}
		s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
		err = s.start(true)
		if !errors.Is(err, errPortTaken) || attempt == attempts {
			if err != nil {
				return nil, err
			}
			return s, nil
		}
		port = freePort
	}
}

// errPortTaken: postgres could not listen on its port, or another
// server answers there.
var errPortTaken = errors.New("pgtest: the port is taken")

// command runs one of PostgreSQL's programs, as the postgres user when the
// test runs as root, in its own process group (so a Ctrl-C of the test does
// not reach it mid-run).
func (s *Server) command(program string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, program), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	cmd.Dir = filepath.Dir(s.Dir)
	return cmd
}

// Restart starts the server (again, after Kill) on the same port and data
// directory; crash recovery replays the WAL. It waits until the server
// accepts connections.
func (s *Server) Restart() error {
	return s.start(false)
}

// start starts postgres and waits until it accepts connections, retrying
// until a deadline: a restarted server's port may still be held a moment.
// On a first start (launchOn) a port another process holds is
// errPortTaken at once, so launchOn can move to another port.
func (s *Server) start(first bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logPath := filepath.Join(filepath.Dir(s.Dir), "postgres.log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := s.command("postgres", "-D", s.Dir, "-p", strconv.Itoa(s.Port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+filepath.Dir(s.Dir),
			"-c", "max_connections=100", "-c", "shared_buffers=16MB")
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		logStart, _ := logFile.Seek(0, io.SeekEnd)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		err = cmd.Start()
		_ = logFile.Close()
		if err != nil {
			return fmt.Errorf("pgtest: start postgres: %w", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		ready, foreign := s.waitReady(done, deadline)
		if ready {
			s.cmd, s.done = cmd, done
			return nil
		}
		// It exited, never answered, or another server answers: try
		// again until the deadline.
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		log, _ := os.ReadFile(logPath)
		if first && (foreign || bytes.Contains(log[min(logStart, int64(len(log))):], []byte("could not bind"))) {
			return fmt.Errorf("%w: %d", errPortTaken, s.Port)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres on port %d did not start; log:\n%s", s.Port, tail(log, 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReady polls until the server accepts a connection (ready), exits,
// another server answers on its port (foreign) or the deadline passes.
func (s *Server) waitReady(done <-chan struct{}, deadline time.Time) (ready, foreign bool) {
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return false, false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		if err == nil {
			// Another test's server may have taken the port first: only
			// ours serves this data directory.
			var dir string
			err = conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dir)
			_ = conn.Close(ctx)
			cancel()
			return err == nil && dir == s.Dir, err == nil && dir != s.Dir
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	return false, false
}

// Kill stops the server as a crash would: the postmaster and every
// process it started (backends, WAL writer, checkpointer) get SIGKILL at
// once, so no backend lives on to answer a client or commit. A process
// group is not enough: PostgreSQL makes each child a session leader of its
// own. Kill stops the postmaster first (so it cannot fork meanwhile),
// collects its children from /proc, stops them all, then kills them all,
// and waits until the postmaster has exited.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	children := childrenOf(pid)
	// Freeze them all before killing any: a backend that outlived another
	// by a moment could take its locks and commit.
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGSTOP)
	}
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-s.done
	s.cmd, s.done = nil, nil
}

// Pool opens a pool on the server that fails fast while it is down (a
// connect timeout of 1 s), closed when the test ends: what a test that
// kills and restarts the server puts its store on.
func (s *Server) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// childrenOf lists the processes whose parent is pid (Linux /proc).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var children []int
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parens.
		rest := raw[bytes.LastIndexByte(raw, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			children = append(children, child)
		}
	}
	return children
}

// Pid is the postmaster's process id (0 when stopped).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// BinDir finds PostgreSQL's server binaries: the newest
// /usr/lib/postgresql/*/bin holding initdb, else the directory of initdb
// on PATH.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: initdb not found under /usr/lib/postgresql/*/bin nor on PATH")
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// postgresUser returns the credentials of the "postgres" system user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs a postgres system user: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: postgres user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
