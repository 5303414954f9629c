// Package dropupstream is an HTTP upstream written on a raw socket that
// answers the first request on each connection and closes the connection on
// the second without answering: the upstream that makes Go's HTTP client
// resend a request carrying an Idempotency-Key header, had the gateway let
// it. It counts every request it read, per Idempotency-Key, at the socket,
// so a test sees each write of a request, resent ones included.
package dropupstream

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// Server is the upstream. Its zero value is not usable; call Start.
type Server struct {
	listener net.Listener
	conns    sync.WaitGroup

	mu       sync.Mutex
	received map[string]int
	dropped  int
	open     map[net.Conn]struct{}
}

// Start listens on a free port of 127.0.0.1.
func Start() (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dropupstream: %w", err)
	}
	s := &Server{listener: l, received: map[string]int{}, open: map[net.Conn]struct{}{}}
	go s.accept()
	return s, nil
}

// URL is the base URL of the upstream; any path is served alike.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// Received is how many requests with Idempotency-Key key were read.
func (s *Server) Received(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[key]
}

// Total is how many requests were read, and how many of them were dropped
// unanswered.
func (s *Server) Total() (read, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.received {
		read += n
	}
	return read, s.dropped
}

// Close stops listening, closes every connection and waits for them.
func (s *Server) Close() {
	_ = s.listener.Close()
	s.mu.Lock()
	for c := range s.open {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.conns.Wait()
}

func (s *Server) accept() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.open[conn] = struct{}{}
		s.mu.Unlock()
		s.conns.Add(1)
		go s.serve(conn)
	}
}

// serve answers the connection's first request and drops the connection
// after reading its second one in full.
func (s *Server) serve(conn net.Conn) {
	defer s.conns.Done()
	defer func() {
		_ = conn.Close()
		s.mu.Lock()
		delete(s.open, conn)
		s.mu.Unlock()
	}()
	r := bufio.NewReader(conn)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		_, err = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
		if err != nil {
			return
		}
		key := req.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.received[key]++
		run := s.received[key]
		if n > 1 {
			s.dropped++
		}
		s.mu.Unlock()
		if n > 1 {
			return // read in full, never answered
		}
		body := `{"key_prefix":"` + key[:min(len(key), 8)] + `","run":` + strconv.Itoa(run) + `}`
		if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
	}
}
