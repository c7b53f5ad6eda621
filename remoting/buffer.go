package remoting

import (
	"bufio"
	"context"
	"fmt"
)

// A connection counts the bytes of its frames: a frame's buffer as it
// grows, then the request until its handler returns. The connection's
// count is bounded by waiting (waitRoom, before a frame is read), the
// server's by refusing (take, as a frame's buffer grows; refuse). The
// count is of buffers allocated, which readFrameRest keeps within twice
// the bytes that arrived.

// take counts n more bytes buffered by the connection and its server. It
// reports false, counting nothing, when they would take the server past
// MaxBufferedBytes, unless first (a frame's first chunk: always taken).
func (c *Conn) take(n int64, first bool) bool {
	total := &c.stats.buffered
	for {
		cur := total.Load()
		if !first && cur+n > c.cfg.MaxBufferedBytes {
			return false
		}
		if total.CompareAndSwap(cur, cur+n) {
			break
		}
	}
	c.held.Add(n)
	return true
}

// give gives back n bytes taken.
func (c *Conn) give(n int64) {
	if n == 0 {
		return
	}
	c.stats.buffered.Add(-n)
	c.held.Add(-n)
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// waitRoom waits until a frame of n more bytes fits the connection's
// MaxBufferedBytesPerConn, that is until enough of its requests were
// answered; it reports whether it waited. It fails only when the
// connection closes.
func (c *Conn) waitRoom(n int64) (waited bool, err error) {
	for c.held.Load()+n > c.cfg.MaxBufferedBytesPerConn {
		waited = true
		select {
		case <-c.freed:
		case <-c.ctx.Done():
			return waited, context.Cause(c.ctx)
		}
	}
	return waited, nil
}

// refuse deals with frame h, of which got (held bytes, given back here)
// was read, when the server had no room to buffer it: a request is
// answered SYSTEM_BUSY (a response to an Invoke of this side completes it
// with SYSTEM_BUSY), and the rest of the frame is read and dropped, so the
// connection goes on. Without its whole header (over the first chunk,
// which is unusual) the frame cannot be answered and the connection is
// closed.
func (c *Conn) refuse(br *bufio.Reader, h frameHead, got []byte, held int64) error {
	c.stats.refused.Add(1)
	why := fmt.Sprintf("Gantry's remoting server is buffering %d bytes of requests, its limit (MaxBufferedBytes) is %d: "+
		"a frame of %d bytes was refused; try again", c.stats.buffered.Load(), c.cfg.MaxBufferedBytes, h.frameLen+4)
	c.give(held)
	if len(got) < h.headerLen {
		return fmt.Errorf("%w: %s, and its header of %d bytes cannot be read to answer it", ErrBusy, why, h.headerLen)
	}
	cmd, err := DecodeHeader(h.t, got[:h.headerLen])
	if err != nil {
		return err
	}
	c.log.Warn("refusing a frame: the server buffers too much", "code", cmd.Code, "response", cmd.IsResponse(),
		"frame_bytes", h.frameLen+4, "buffered", c.stats.buffered.Load(), "limit", c.cfg.MaxBufferedBytes)
	switch {
	case cmd.IsResponse():
		busy := NewResponse(cmd, ResSystemBusy, why)
		c.deliver(busy)
	case !cmd.IsOneway():
		_ = c.write(c.ctx, ErrorResponse(cmd, ResSystemBusy, "%s", why)) // a failed write closes the connection
	}
	if _, err := br.Discard(h.rest() - len(got)); err != nil {
		return noEOF(err)
	}
	return nil
}
