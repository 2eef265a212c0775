package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"time"
)

// A Verifier checks the signature of a Bundle: with a public key, as
// 'model_signing verify key' does, or with trusted certificates, as
// 'model_signing verify certificate' does.
type Verifier struct {
	key   *ecdsa.PublicKey // key mode
	hint  string           // the key's hint: SHA-256 of its PEM
	roots *x509.CertPool   // certificate mode
	pins  [][]byte         // the trusted certificates, DER
}

// curveOK reports whether c is a curve model_signing supports.
func curveOK(c elliptic.Curve) bool {
	return c == elliptic.P256() || c == elliptic.P384() || c == elliptic.P521()
}

// hashFor returns the hash that signs with k's curve: SHA-256, SHA-384 or
// SHA-512, as model_signing chooses it.
func hashFor(k *ecdsa.PublicKey) crypto.Hash {
	switch k.Curve.Params().BitSize {
	case 384:
		return crypto.SHA384
	case 521:
		return crypto.SHA512
	}
	return crypto.SHA256
}

func sum(h crypto.Hash, b []byte) []byte {
	switch h {
	case crypto.SHA384:
		d := sha512.Sum384(b)
		return d[:]
	case crypto.SHA512:
		d := sha512.Sum512(b)
		return d[:]
	}
	d := sha256.Sum256(b)
	return d[:]
}

// pemBlock returns the first PEM block of data, of one of the types.
func pemBlock(data []byte, what string, types ...string) (*pem.Block, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%w: %s: no PEM block (a truncated or binary file?)", ErrInvalidKey, what)
	}
	for _, t := range types {
		if b.Type == t {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: %s: a PEM %q block, want %q", ErrInvalidKey, what, b.Type, types[0])
}

// keyHint is model_signing's hint of a public key: the SHA-256, in hex,
// of its PEM (SubjectPublicKeyInfo).
func keyHint(k *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return "", err
	}
	d := sha256.Sum256(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return hex.EncodeToString(d[:]), nil
}

// KeyVerifier returns a Verifier that checks signatures with the public
// key in pemData (a PEM "PUBLIC KEY", ECDSA P-256, P-384 or P-521). Errors
// wrap ErrInvalidKey.
func KeyVerifier(pemData []byte) (*Verifier, error) {
	b, err := pemBlock(pemData, "public key", "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", ErrInvalidKey, err)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || !curveOK(k.Curve) {
		return nil, fmt.Errorf("%w: public key: a %T, want ECDSA P-256, P-384 or P-521", ErrInvalidKey, pub)
	}
	hint, err := keyHint(k)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", ErrInvalidKey, err)
	}
	return &Verifier{key: k, hint: hint}, nil
}

// CertificateVerifier returns a Verifier that trusts the certificates in
// pemData (one or more PEM "CERTIFICATE" blocks), as model_signing's
// --certificate_chain: a signature is accepted when the signing
// certificate in its bundle chains to one of them (through the bundle's
// other certificates), checked as of the signing certificate's NotBefore
// time, as model_signing checks it, and may sign (key usage
// digitalSignature, or extended key usage codeSigning); the signature is
// then verified with the signing certificate's key. No revocation is
// checked, and no Sigstore transparency log. Errors wrap ErrInvalidKey.
func CertificateVerifier(pemData []byte) (*Verifier, error) {
	v := &Verifier{roots: x509.NewCertPool()}
	for rest := pemData; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d: %v", ErrInvalidKey, len(v.pins)+1, err)
		}
		v.roots.AddCert(c)
		v.pins = append(v.pins, b.Bytes)
	}
	if len(v.pins) == 0 {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE block (a truncated or binary file?)", ErrInvalidKey)
	}
	return v, nil
}

// Verify checks b's signature and returns the Manifest it signs. Errors
// wrap ErrBadSignature (another key, a changed payload), ErrCertificate,
// or those of ParseStatement.
func (v *Verifier) Verify(b *Bundle) (*Manifest, error) {
	key := v.key
	if v.roots != nil {
		var err error
		if key, err = v.certificateKey(b); err != nil {
			return nil, err
		}
	} else if b.KeyHint != "" && b.KeyHint != v.hint {
		return nil, fmt.Errorf("%w: signed by another key: the signature names the key %s, the key given is %s", ErrBadSignature, b.KeyHint, v.hint)
	}
	if !ecdsa.VerifyASN1(key, sum(hashFor(key), pae(b.Payload)), b.Signature) {
		return nil, fmt.Errorf("%w: the ECDSA signature of the statement does not verify with the key: another key signed, or the statement was changed", ErrBadSignature)
	}
	return ParseStatement(b.Payload)
}

// certificateKey checks b's certificate chain against v's trusted
// certificates and returns the signing certificate's key.
func (v *Verifier) certificateKey(b *Bundle) (*ecdsa.PublicKey, error) {
	if len(b.Certificates) == 0 {
		return nil, fmt.Errorf("%w: the signature holds no certificate (signed with a key: verify it with the public key)", ErrCertificate)
	}
	leaf, err := x509.ParseCertificate(b.Certificates[0])
	if err != nil {
		return nil, fmt.Errorf("%w: the signing certificate: %v", ErrInvalidSignature, err)
	}
	inter := x509.NewCertPool()
	for i, der := range b.Certificates[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d of the chain: %v", ErrInvalidSignature, i+2, err)
		}
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: v.roots, Intermediates: inter, CurrentTime: leaf.NotBefore.Add(time.Second), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("%w: the signing certificate (%s): %v", ErrCertificate, leaf.Subject, err)
	}
	canSign := leaf.KeyUsage&x509.KeyUsageDigitalSignature != 0
	for _, u := range leaf.ExtKeyUsage {
		canSign = canSign || u == x509.ExtKeyUsageCodeSigning
	}
	if !canSign {
		return nil, fmt.Errorf("%w: the signing certificate (%s) may not sign: no digitalSignature key usage, no codeSigning extended key usage", ErrCertificate, leaf.Subject)
	}
	k, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || !curveOK(k.Curve) {
		return nil, fmt.Errorf("%w: the signing certificate's key is a %T, want ECDSA P-256, P-384 or P-521", ErrUnsupported, leaf.PublicKey)
	}
	return k, nil
}

// ParsePrivateKey reads an ECDSA private key (P-256, P-384 or P-521) from
// PEM: "PRIVATE KEY" (PKCS #8) or "EC PRIVATE KEY" (SEC 1), as openssl
// and Python's cryptography write them, unencrypted. Errors wrap
// ErrInvalidKey.
func ParsePrivateKey(pemData []byte) (*ecdsa.PrivateKey, error) {
	b, err := pemBlock(pemData, "private key", "PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	var key any
	switch b.Type {
	case "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("%w: private key: encrypted; decrypt it first (openssl pkey -in KEY -out PLAIN)", ErrInvalidKey)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: private key: %v", ErrInvalidKey, err)
	}
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok || !curveOK(k.Curve) {
		return nil, fmt.Errorf("%w: private key: a %T, want ECDSA P-256, P-384 or P-521", ErrInvalidKey, key)
	}
	return k, nil
}

// sign returns the bundle of the statement payload signed by key, in key
// mode (the key's hint), or with the certificates chain (DER, the signing
// certificate first) in certificate mode.
func sign(key *ecdsa.PrivateKey, payload []byte, chain [][]byte) ([]byte, error) {
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum(hashFor(&key.PublicKey), pae(payload)))
	if err != nil {
		return nil, err
	}
	var b bundleJSON
	b.MediaType = BundleMediaType
	b.VerificationMaterial.TlogEntries = []json.RawMessage{}
	if chain == nil {
		hint, err := keyHint(&key.PublicKey)
		if err != nil {
			return nil, err
		}
		b.VerificationMaterial.PublicKey = &struct {
			Hint string `json:"hint,omitempty"`
		}{hint}
	} else {
		b.VerificationMaterial.X509CertificateChain = &struct {
			Certificates []struct {
				RawBytes string `json:"rawBytes"`
			} `json:"certificates"`
		}{}
		for _, der := range chain {
			b.VerificationMaterial.X509CertificateChain.Certificates = append(b.VerificationMaterial.X509CertificateChain.Certificates, struct {
				RawBytes string `json:"rawBytes"`
			}{base64.StdEncoding.EncodeToString(der)})
		}
	}
	b.DSSEEnvelope = &struct {
		Payload     string `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			Sig   string `json:"sig"`
			KeyID string `json:"keyid"`
		} `json:"signatures"`
	}{Payload: base64.StdEncoding.EncodeToString(payload), PayloadType: PayloadType}
	b.DSSEEnvelope.Signatures = append(b.DSSEEnvelope.Signatures, struct {
		Sig   string `json:"sig"`
		KeyID string `json:"keyid"`
	}{Sig: base64.StdEncoding.EncodeToString(sig)})
	return json.Marshal(b)
}
