package remoting

import (
	"context"
	"fmt"
)

// Handler answers the requests of a connection. ServeRemoting runs in a
// goroutine of its own per request, concurrently with the connection's
// other requests; ctx is canceled when the connection closes. It returns
// the response, or nil to send none. The connection sets the response's
// Opaque and FlagResponse (so return a Command of the request's own, never
// a shared one), and sends nothing for a oneway request.
type Handler interface {
	ServeRemoting(ctx context.Context, c *Conn, req *Command) *Command
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Conn, req *Command) *Command

// ServeRemoting calls f.
func (f HandlerFunc) ServeRemoting(ctx context.Context, c *Conn, req *Command) *Command {
	return f(ctx, c, req)
}

// Mux routes requests to a Handler by request code. A code with no
// handler is answered REQUEST_CODE_NOT_SUPPORTED (NotSupported), never by
// dropping the connection. Register every handler before serving: Handle
// is not safe to call concurrently with ServeRemoting.
type Mux struct {
	handlers map[RequestCode]Handler
}

// NewMux returns a Mux with no handlers.
func NewMux() *Mux { return &Mux{handlers: make(map[RequestCode]Handler)} }

// Handle routes code to h. Registering a code twice, or a nil h, is a
// programming error and panics.
func (m *Mux) Handle(code RequestCode, h Handler) {
	if h == nil {
		panic(fmt.Sprintf("remoting: nil handler for %s", code))
	}
	if _, dup := m.handlers[code]; dup {
		panic(fmt.Sprintf("remoting: two handlers for %s", code))
	}
	m.handlers[code] = h
}

// HandleFunc routes code to f.
func (m *Mux) HandleFunc(code RequestCode, f func(ctx context.Context, c *Conn, req *Command) *Command) {
	m.Handle(code, HandlerFunc(f))
}

// ServeRemoting passes req to the handler of its code.
func (m *Mux) ServeRemoting(ctx context.Context, c *Conn, req *Command) *Command {
	if h, ok := m.handlers[req.RequestCode()]; ok {
		return h.ServeRemoting(ctx, c, req)
	}
	return NotSupported(req)
}
