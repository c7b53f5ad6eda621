package tlsx

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DevFiles are the files WriteDevCerts writes: a CA, a server certificate
// it signed (usable as a client certificate too) and a client certificate
// it signed, each with its key. The CA's key is not kept: nothing else can
// be signed with it.
type DevFiles struct {
	CA                    string // ca.pem
	ServerCert, ServerKey string // server.pem, server-key.pem
	ClientCert, ClientKey string // client.pem, client-key.pem
}

// DevHosts are the names a development server certificate covers:
// localhost, 127.0.0.1, ::1 and the machine's host name.
func DevHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append(hosts, h)
	}
	return hosts
}

// devValidity is how long development certificates are valid.
const devValidity = 90 * 24 * time.Hour

// devFiles are the paths of the files in dir.
func devFiles(dir string) DevFiles {
	j := func(n string) string { return filepath.Join(dir, n) }
	return DevFiles{CA: j("ca.pem"), ServerCert: j("server.pem"), ServerKey: j("server-key.pem"),
		ClientCert: j("client.pem"), ClientKey: j("client-key.pem")}
}

// EnsureDevCerts returns the development certificates in dir, writing
// new ones (WriteDevCerts) unless dir holds a set that loads, covers
// hosts and is valid for another day.
func EnsureDevCerts(dir string, hosts []string) (DevFiles, error) {
	f := devFiles(dir)
	if f.usable(hosts) {
		return f, nil
	}
	return WriteDevCerts(dir, hosts)
}

// usable reports whether f's files load, chain to f.CA, cover hosts and
// are valid for another day.
func (f DevFiles) usable(hosts []string) bool {
	roots, err := loadCAs("ca", f.CA)
	if err != nil {
		return false
	}
	soon := time.Now().Add(24 * time.Hour)
	for _, p := range [][2]string{{f.ServerCert, f.ServerKey}, {f.ClientCert, f.ClientKey}} {
		pair, err := loadKeyPair("cert", p[0], "key", p[1])
		if err != nil {
			return false
		}
		leaf := pair.Leaf
		opts := x509.VerifyOptions{Roots: roots, CurrentTime: soon, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := leaf.Verify(opts); err != nil {
			return false
		}
		if p[0] == f.ServerCert {
			for _, h := range hosts {
				if leaf.VerifyHostname(h) != nil {
					return false
				}
			}
		}
	}
	return true
}

// WriteDevCerts writes a new throw-away CA and, signed by it, a server
// certificate for hosts (names and IP addresses; its key usages allow it
// to be shown by a client too, as one broker dials another) and a client
// certificate (CN gantry-dev-client), into dir (created if need be), keys
// readable by the owner only. For development and tests: the
// certificates are valid for 90 days.
func WriteDevCerts(dir string, hosts []string) (DevFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevFiles{}, fmt.Errorf("tlsx: certificates directory: %w", err)
	}
	f := devFiles(dir)
	now := time.Now().Add(-time.Hour) // a clock a little behind still accepts them
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return DevFiles{}, err
	}
	ca := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "Gantry development CA", Organization: []string{"Gantry dev"}},
		NotBefore:             now,
		NotAfter:              now.Add(devValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := sign(ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return DevFiles{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return DevFiles{}, err
	}
	if err := writePEM(f.CA, 0o644, "CERTIFICATE", caDER); err != nil {
		return DevFiles{}, err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gantry-dev-server", Organization: []string{"Gantry dev"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gantry-dev-client", Organization: []string{"Gantry dev"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, leaf := range []struct {
		tmpl      *x509.Certificate
		cert, key string
	}{{server, f.ServerCert, f.ServerKey}, {client, f.ClientCert, f.ClientKey}} {
		leaf.tmpl.NotBefore, leaf.tmpl.NotAfter = now, now.Add(devValidity)
		leaf.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		if err := writeLeaf(leaf.tmpl, caCert, caKey, leaf.cert, leaf.key); err != nil {
			return DevFiles{}, err
		}
	}
	return f, nil
}

// writeLeaf makes a key, signs tmpl for it with the CA and writes both.
func writeLeaf(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := sign(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return errors.Join(writePEM(certPath, 0o644, "CERTIFICATE", der), writePEM(keyPath, 0o600, "PRIVATE KEY", keyDER))
}

// sign signs tmpl with a fresh random serial number.
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, by *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, by)
	if err != nil {
		return nil, fmt.Errorf("tlsx: sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// writePEM writes one PEM block to path, replacing it whole (a reader
// never sees half a file).
func writePEM(path string, perm os.FileMode, typ string, der []byte) error {
	tmp := path + ".tmp"
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(tmp, b, perm); err != nil {
		return fmt.Errorf("tlsx: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tlsx: write %s: %w", path, err)
	}
	return nil
}
