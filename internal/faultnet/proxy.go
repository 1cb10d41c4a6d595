// Package faultnet is a TCP proxy for fault-injection tests: it forwards
// connections to a target address until told to cut the link, which then
// holds every byte (a partition: nothing gets through and nothing is
// refused, so clients hang until their own deadlines) until the link heals,
// or to play a stopped server (Down: every connection closed and every new
// one refused at once) until it comes back.
package faultnet

import (
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from Addr to a target.
type Proxy struct {
	ln     net.Listener
	target func() string

	mu    sync.Mutex
	cut   bool
	down  bool          // a stopped server: connections are closed at once
	heal  chan struct{} // closed when the link heals
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	done  bool
}

// Listen starts a proxy on a free loopback port that forwards to target.
func Listen(target string) (*Proxy, error) {
	return ListenTo(func() string { return target })
}

// ListenTo starts a proxy on a free loopback port that forwards each new
// connection to the address target returns then: a stable address in front
// of a server that moves (a process restarted on another port). While
// target returns "", new connections are closed at once, as a stopped
// server's port refuses them.
func ListenTo(target func() string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, heal: make(chan struct{})}
	close(p.heal)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut partitions the link: bytes in flight and new connections wait.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut = true
		p.heal = make(chan struct{})
	}
}

// Down plays a stopped server: every open connection is closed, and new
// ones are accepted and closed at once (so clients fail fast, as against a
// stopped database's closed port), until Heal.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal restores the link (after Cut or Down); held bytes and connections go
// through.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	if p.cut {
		p.cut = false
		close(p.heal)
	}
}

// Reset closes every open connection (as a crashed peer would) without
// cutting the link for new ones.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	err := p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	if p.cut {
		p.cut = false
		close(p.heal)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// gate blocks while the link is cut; it reports false once the proxy closed.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	h, done := p.heal, p.done
	p.mu.Unlock()
	<-h
	return !done
}

// track records an open connection; while the proxy is down or once it
// closed, it closes c instead and reports false.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.down {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			p.mu.Lock()
			done := p.done
			p.mu.Unlock()
			if done {
				return
			}
			continue // down: refused
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	if !p.gate() {
		return
	}
	to := p.target()
	if to == "" {
		return
	}
	up, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(up, c) }()
	go func() { defer wg.Done(); p.pipe(c, up) }()
	wg.Wait()
}

// pipe copies src to dst, holding each chunk while the link is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
