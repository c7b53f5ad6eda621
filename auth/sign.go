package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The ext fields of a signed RocketMQ remoting request (ACL 1.0).
const (
	ExtAccessKey     = "AccessKey"
	ExtSignature     = "Signature"
	ExtSecurityToken = "SecurityToken"
	// extUniqueKeyQuery is left out of the signed content by Java's
	// broker (PlainAccessResource), not by the Go client.
	extUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// maxSignedFields bounds the ext fields a signature covers on the stack;
// requests carry about 20.
const maxSignedFields = 48

// SignRemoting returns the Signature of a remoting request as the official
// RocketMQ Go client computes it: base64 HMAC-SHA1, keyed with the secret
// key, over the values of ext in the order of their keys and then body.
// ext must hold AccessKey; Signature and SecurityToken are left out, as
// the Go client leaves them.
func SignRemoting(secretKey string, ext map[string]string, body []byte) string {
	m := &macState{h: hmac.New(sha1.New, []byte(secretKey)), buf: make([]byte, 0, 256)}
	remotingContent(m, ext, body, false)
	return base64.StdEncoding.EncodeToString(m.digest())
}

// remotingContent writes the signed content of a request into h: the
// values of ext but Signature (and but SecurityToken, unless java, where
// _UNIQUE_KEY_QUERY is left out instead), in key order, then body.
func remotingContent(m *macState, ext map[string]string, body []byte, java bool) {
	var stack [maxSignedFields]string
	keys := stack[:0]
	for k := range ext {
		if k == ExtSignature || (!java && k == ExtSecurityToken) || (java && k == extUniqueKeyQuery) {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m.write(ext[k])
	}
	m.h.Write(body)
}

// VerifyRemoting authenticates a remoting request by its AccessKey and
// Signature ext fields. A request with neither is anonymous: (nil, nil).
// The signature is checked as the Go client computes it and, when that
// differs and the request holds SecurityToken or _UNIQUE_KEY_QUERY, as
// Java's clients do.
func (u *Users) VerifyRemoting(ext map[string]string, body []byte) (*Principal, error) {
	ak, sig := ext[ExtAccessKey], ext[ExtSignature]
	if ak == "" && sig == "" {
		return nil, nil
	}
	if ak == "" || sig == "" {
		return nil, unauthenticated(ReasonMalformed, ak, "a signed request needs both AccessKey and Signature")
	}
	p, ok := u.Lookup(ak)
	if !ok {
		return nil, unauthenticated(ReasonUnknownKey, "", "unknown access key "+strconv.Quote(ak))
	}
	if len(ext) > maxSignedFields {
		return nil, unauthenticated(ReasonMalformed, ak, "too many ext fields to check a signature")
	}
	if p.remotingSigned(ext, body, sig, false) {
		return p, nil
	}
	_, token := ext[ExtSecurityToken]
	_, unique := ext[extUniqueKeyQuery]
	if (token || unique) && p.remotingSigned(ext, body, sig, true) {
		return p, nil
	}
	return nil, unauthenticated(ReasonBadSignature, ak, "the request's Signature does not match its content and the user's secret key")
}

func (p *Principal) remotingSigned(ext map[string]string, body []byte, sig string, java bool) bool {
	var enc [28]byte // base64 of 20 bytes
	mac(&p.sha1, func(m *macState) {
		remotingContent(m, ext, body, java)
		base64.StdEncoding.Encode(enc[:], m.digest())
	})
	return len(sig) == len(enc) && subtle.ConstantTimeCompare(enc[:], []byte(sig)) == 1
}

// The gRPC metadata of a signed call (docs/SECURITY.md, "gRPC").
const (
	// MDDate is the signing time, Unix milliseconds in decimal.
	MDDate = "x-gantry-date"
	// MDAuthorization is "GANTRY-HMAC-SHA256 Credential=<access key>,
	// Signature=<base64 HMAC-SHA256 of the method, a newline and the
	// date>".
	MDAuthorization = "authorization"
	grpcScheme      = "GANTRY-HMAC-SHA256"
)

// DefaultWindow is how far a gRPC call's date may lie from the server's
// clock, either way.
const DefaultWindow = time.Minute

// SignGRPC returns the MDDate and MDAuthorization values of a call of
// method (its full name, "/gantry.v1.Messaging/Send") at now.
func SignGRPC(accessKey, secretKey, method string, now time.Time) (date, authorization string) {
	date = strconv.FormatInt(now.UnixMilli(), 10)
	m := &macState{h: hmac.New(sha256.New, []byte(secretKey)), buf: make([]byte, 0, 256)}
	grpcContent(m, method, date)
	return date, grpcScheme + " Credential=" + accessKey + ", Signature=" + base64.StdEncoding.EncodeToString(m.digest())
}

func grpcContent(m *macState, method, date string) {
	m.write(method)
	m.write("\n")
	m.write(date)
}

// VerifyGRPC authenticates a gRPC call of method by its MDDate and
// MDAuthorization values (empty: absent), at now, accepting dates within
// window of now. A call with neither is anonymous: (nil, nil).
func (u *Users) VerifyGRPC(method, date, authorization string, now time.Time, window time.Duration) (*Principal, error) {
	if date == "" && authorization == "" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(authorization, grpcScheme+" Credential=")
	ak, sig, ok2 := strings.Cut(rest, ", Signature=")
	if !ok || !ok2 || ak == "" || sig == "" {
		return nil, unauthenticated(ReasonMalformed, "", "want authorization metadata \""+grpcScheme+" Credential=<access key>, Signature=<signature>\"")
	}
	ms, err := strconv.ParseInt(date, 10, 64)
	if err != nil {
		return nil, unauthenticated(ReasonMalformed, ak, "want "+MDDate+" metadata in Unix milliseconds, got "+strconv.Quote(date))
	}
	p, ok := u.Lookup(ak)
	if !ok {
		return nil, unauthenticated(ReasonUnknownKey, "", "unknown access key "+strconv.Quote(ak))
	}
	var enc [44]byte // base64 of 32 bytes
	mac(&p.sha256, func(m *macState) {
		grpcContent(m, method, date)
		base64.StdEncoding.Encode(enc[:], m.digest())
	})
	if len(sig) != len(enc) || subtle.ConstantTimeCompare(enc[:], []byte(sig)) != 1 {
		return nil, unauthenticated(ReasonBadSignature, ak, "the call's signature does not match its method, date and the user's secret key")
	}
	if skew := now.Sub(time.UnixMilli(ms)); skew > window || skew < -window {
		return nil, unauthenticated(ReasonExpired, ak, "the call was signed at "+time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)+
			", outside the "+window.String()+" window around the server's clock")
	}
	return p, nil
}

// Signer signs a user's gRPC calls, reusing its HMACs. Safe for
// concurrent use.
type Signer struct{ p *Principal }

// NewSigner returns the Signer of a user's keys.
func NewSigner(accessKey, secretKey string) (*Signer, error) {
	p, err := compileUser(User{AccessKey: accessKey, SecretKey: secretKey})
	if err != nil {
		return nil, err
	}
	return &Signer{p: p}, nil
}

// AccessKey is the signing user's access key.
func (s *Signer) AccessKey() string { return s.p.accessKey }

// SignGRPC is the package's SignGRPC with the Signer's keys.
func (s *Signer) SignGRPC(method string, now time.Time) (date, authorization string) {
	var dbuf [20]byte
	d := strconv.AppendInt(dbuf[:0], now.UnixMilli(), 10)
	var enc [44]byte
	mac(&s.p.sha256, func(m *macState) {
		m.write(method)
		m.write("\n")
		m.h.Write(d)
		base64.StdEncoding.Encode(enc[:], m.digest())
	})
	return string(d), grpcScheme + " Credential=" + s.p.accessKey + ", Signature=" + string(enc[:])
}
