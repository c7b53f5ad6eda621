// Package remoting is RocketMQ's remoting protocol: the
// TCP framing and headers the official clients speak, the request and
// response codes, and a server and client for it. It knows nothing of
// topics or messages: the nameserver and broker front ends give a Server
// a Handler that turns requests into calls on their components.
//
// # Wire format
//
// A frame is [frameLen int32][type uint8][headerLen uint24][header][body],
// big-endian, frameLen counting everything after itself. The header is JSON
// (type 0, what the Go client sends) or ROCKETMQ binary (type 1); both are
// decoded and encoded, and a response goes out in its request's type. JSON
// headers are written the way a Java broker writes them (keys sorted,
// language "JAVA", "serializeTypeCurrentRPC":"JSON", ext values strings),
// so the bytes of a frame depend only on its fields. ReadFrame refuses a
// frame over the size limit (16 MiB by default, Java's), or with an
// impossible length, before allocating anything for it, and grows a
// frame's buffer as its bytes arrive, never to more than twice what came.
//
// # Connections
//
// A Conn reads frames in one goroutine and runs each request's Handler in
// a goroutine of its own, at most Config.MaxConcurrentPerConn at once: a
// pull held for 20 s never delays the sends and heartbeats that share its
// connection. Responses go out in any order, each frame
// written whole under the connection's write lock. A handler panic is
// answered SYSTEM_ERROR; a malformed frame closes that connection only,
// since a byte stream cannot be resynchronized. The bytes a connection
// buffers (the frame being read, its requests not yet answered) are
// bounded per connection, by not reading it, and per server, by refusing
// a frame with SYSTEM_BUSY (Config.MaxBufferedBytesPerConn and
// MaxBufferedBytes; docs/BROKER.md, "Size limits"). Responses arriving on a
// connection complete the Conn.Invoke that sent their opaque, so a server
// can call its clients (NOTIFY_CONSUMER_IDS_CHANGED).
//
// # Goroutines and locks
//
// Every goroutine has an owner: a Server owns each connection's read loop,
// which owns its handlers and joins them before running OnClose functions;
// Server.Close and Client.Close return only when all are gone. Neither may
// be called from a handler of the connections they close (Conn.Close may).
// Conn.mu (pending requests, close hooks) and Conn.wmu (frame writes) are
// never held together; Server.mu is never held while taking either.
//
// All exported methods of Server, Client, Conn and Mux (once configured)
// are safe for concurrent use; a Command is not.
package remoting
