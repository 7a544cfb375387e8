// Package objstore is pipec's S3 client: the artifact store on S3
// (runtime/artifacts) and the s3 sink (runtime/sink) talk to an object store
// only through it. It is a thin layer on the AWS SDK for Go v2: URLs
// ("s3://bucket/prefix"), credentials the AWS way, conditional writes
// (If-None-Match: * to create, If-Match: <ETag> to compare-and-swap) with a
// precondition failure as an error value, and the probe that says whether a
// server honours them.
//
// Credentials and the endpoint come from where every AWS tool takes them:
// the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE), the shared config and
// credentials files, SSO, the instance's role; AWS_ENDPOINT_URL (or
// AWS_ENDPOINT_URL_S3) points at an S3-compatible server (MinIO, versitygw,
// R2), which is then addressed path-style (http://host/bucket/key). pipec
// never prints a credential nor records one in the state: every secret a
// client was built with is in Secrets, which the runtime's redactor masks.
package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
)

// Scheme is the URL scheme of an object store location.
const Scheme = "s3://"

// IsURL reports whether a location names an object store ("s3://…").
func IsURL(location string) bool { return strings.HasPrefix(location, Scheme) }

// URL is a place in a bucket: "s3://bucket/prefix".
type URL struct {
	Bucket string
	// Prefix has no leading or trailing slash; "" is the bucket's root.
	Prefix string
}

// ParseURL reads "s3://bucket[/prefix]".
func ParseURL(s string) (URL, error) {
	if !IsURL(s) {
		return URL{}, fmt.Errorf("%q is not an s3:// URL", s)
	}
	rest := strings.TrimPrefix(s, Scheme)
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return URL{}, fmt.Errorf("%q names no bucket (s3://bucket/prefix)", s)
	}
	prefix = strings.Trim(prefix, "/")
	for _, el := range strings.Split(prefix, "/") {
		if prefix != "" && (el == "" || el == "." || el == "..") {
			return URL{}, fmt.Errorf("%q: the prefix has an empty, . or .. element", s)
		}
	}
	return URL{Bucket: bucket, Prefix: prefix}, nil
}

// Key is the object key of a path under the prefix (slash-separated parts).
func (u URL) Key(parts ...string) string {
	all := make([]string, 0, len(parts)+1)
	if u.Prefix != "" {
		all = append(all, u.Prefix)
	}
	return strings.Join(append(all, parts...), "/")
}

// String is "s3://bucket/prefix".
func (u URL) String() string {
	if u.Prefix == "" {
		return Scheme + u.Bucket
	}
	return Scheme + u.Bucket + "/" + u.Prefix
}

// Of is the URL of one key of the bucket.
func (u URL) Of(key string) string { return Scheme + u.Bucket + "/" + key }

// ErrNotFound is returned when a key does not exist.
var ErrNotFound = errors.New("no such object")

// ErrPrecondition is returned when a conditional write or read is refused:
// If-None-Match: * on a key that exists, If-Match on an ETag that is no
// longer the object's (412), or a concurrent conditional write of the same
// key (409 ConditionalRequestConflict). Nothing was written.
var ErrPrecondition = errors.New("precondition failed")

// ErrNotImplemented is returned when the server refuses a request for a
// feature it does not have (501, or the NotImplemented error code: some
// servers answer a conditional PutObject so).
var ErrNotImplemented = errors.New("the server does not implement it")

// Client is an S3 client with the calls pipec makes.
type Client struct {
	s3 *s3.Client
	// tm uploads files, in parts above its threshold: one PutObject
	// stops at 5 GB, and a large version goes faster in parallel parts.
	tm *transfermanager.Client
	// Endpoint names the server in messages (never a credential).
	Endpoint string
	trips    atomic.Int64
	// secrets are the credentials New resolved, never printed.
	secrets []string
}

// RoundTrips is how many HTTP requests the client sent (retries included).
func (c *Client) RoundTrips() int64 { return c.trips.Load() }

type countingTransport struct {
	next  http.RoundTripper
	trips *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.trips.Add(1)
	return t.next.RoundTrip(r)
}

// Clients builds one Client per AWS environment (the endpoint and
// credentials variables) and remembers the secrets each resolved, for the
// runtime's redactor. A command makes one and hands it down: a run opens an
// artifact store and several sinks, and a worker runs many visits, each of
// which would otherwise resolve the credentials again. The zero value is
// ready; a nil *Clients builds a new client on every Get.
type Clients struct {
	mu      sync.Mutex
	byEnv   map[string]*Client
	secrets []string
}

// Get is the client for the environment as it is now, built on first use.
func (cs *Clients) Get(ctx context.Context) (*Client, error) {
	if cs == nil {
		return New(ctx)
	}
	var id strings.Builder
	for _, name := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		id.WriteString(os.Getenv(name) + "\x00")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.byEnv[id.String()]; ok {
		return c, nil
	}
	c, err := New(ctx)
	if err != nil {
		return nil, err
	}
	if cs.byEnv == nil {
		cs.byEnv = map[string]*Client{}
	}
	cs.byEnv[id.String()] = c
	for _, v := range c.secrets {
		if !slices.Contains(cs.secrets, v) {
			cs.secrets = append(cs.secrets, v)
		}
	}
	return c, nil
}

// Secrets are the secret access keys and session tokens of every client Get
// built (from the environment or the shared files alike), and those the
// environment names even when no client was built.
func (cs *Clients) Secrets() []string {
	var out []string
	if cs != nil {
		cs.mu.Lock()
		out = slices.Clone(cs.secrets)
		cs.mu.Unlock()
	}
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if v := os.Getenv(name); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// AnswerWithin bounds how long the object store may leave a request
// without a byte moving on its connection: before it begins its answer,
// while it sends a body, or while it takes ours. A server that stopped
// answering with its connection open would otherwise hold a visit's fetch
// or publish for ever, while its worker's heartbeat kept the claim alive;
// this way the request fails as a refused connection does (the SDK tries
// a request again, then gives up; a body cut off is the caller's error). A
// slow server moves bytes well within it: S3 answers even a long copy with
// its headers at once.
const AnswerWithin = time.Minute

// New builds a client from the AWS configuration of the environment. The
// credentials are resolved now, so that a missing or broken configuration is
// said at once, and kept for Clients.Secrets.
func New(ctx context.Context) (*Client, error) { return newClient(ctx, AnswerWithin) }

func newClient(ctx context.Context, answerWithin time.Duration) (*Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("object store: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		// S3-compatible servers ignore it; AWS needs one to sign.
		cfg.Region = "us-east-1"
	}
	c := &Client{Endpoint: "AWS S3"}
	// The SDK tries a failed request again three times, at first within
	// milliseconds; beyond that, a server that is away is waited for by
	// awaitServer, for a bounded time. The SDK's retry quota is off: it is
	// shared by every request of a client, which lives as long as a worker,
	// so the retries of one outage would leave later requests with none.
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
	}
	endpoint := cmpOr(os.Getenv("AWS_ENDPOINT_URL_S3"), aws.ToString(cfg.BaseEndpoint))
	if endpoint != "" {
		c.Endpoint = endpoint
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 64
	base.DialContext = silenceBound{dial: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		limit: answerWithin}.DialContext
	cfg.HTTPClient = &http.Client{Transport: countingTransport{next: base, trips: &c.trips}}
	c.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
		// Checksums only where the API requires them: pipec checks every
		// version's sha256 itself, and S3-compatible servers differ in the
		// trailing checksums they accept.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	c.tm = transfermanager.New(c.s3, func(o *transfermanager.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("object store %s: no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or AWS_PROFILE, as for the aws command): %w", c.Endpoint, err)
	}
	for _, v := range []string{creds.SecretAccessKey, creds.SessionToken} {
		if v != "" {
			c.secrets = append(c.secrets, v)
		}
	}
	return c, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Cond is a write's precondition.
type Cond struct {
	// IfNoneMatch: create only (the key must not exist).
	IfNoneMatch bool
	// IfMatch: replace only the object with this ETag.
	IfMatch string
}

// Put writes body at key under cond and returns the new object's ETag.
func (c *Client) Put(ctx context.Context, bucket, key string, body []byte, cond Cond) (string, error) {
	return c.put(ctx, bucket, key, bytes.NewReader(body), int64(len(body)), cond)
}

// PutFile uploads a local file to key, unconditionally (a version's files
// go under keys of their own, never written over), in parts when it is
// large; a failed multipart upload is aborted, so no part is left behind.
func (c *Client) PutFile(ctx context.Context, bucket, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = c.awaitServer(ctx, func() error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := c.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f})
		return err
	})
	if err != nil {
		return c.wrap("put", bucket, key, err)
	}
	return nil
}

func (c *Client) put(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64, cond Cond) (string, error) {
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size)}
	if cond.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if cond.IfMatch != "" {
		in.IfMatch = aws.String(cond.IfMatch)
	}
	var out *s3.PutObjectOutput
	err := c.awaitServer(ctx, func() error {
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var err error
		out, err = c.s3.PutObject(ctx, in)
		return err
	})
	if err != nil {
		return "", c.wrap("put", bucket, key, err)
	}
	return aws.ToString(out.ETag), nil
}

// Get reads a whole (small) object and its ETag.
func (c *Client) Get(ctx context.Context, bucket, key string) ([]byte, string, error) {
	out, err := c.getObject(ctx, bucket, key)
	if err != nil {
		return nil, "", c.wrap("get", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", c.wrap("get", bucket, key, err)
	}
	return b, aws.ToString(out.ETag), nil
}

// GetTo streams an object into w and returns how many bytes it wrote.
func (c *Client) GetTo(ctx context.Context, bucket, key string, w io.Writer) (int64, error) {
	out, err := c.getObject(ctx, bucket, key)
	if err != nil {
		return 0, c.wrap("get", bucket, key, err)
	}
	defer out.Body.Close()
	n, err := io.Copy(w, out.Body)
	if err != nil {
		return n, c.wrap("get", bucket, key, err)
	}
	return n, nil
}

// getObject begins reading an object: the server away is waited for
// until its answer begins, never once its body is read.
func (c *Client) getObject(ctx context.Context, bucket, key string) (*s3.GetObjectOutput, error) {
	var out *s3.GetObjectOutput
	err := c.awaitServer(ctx, func() error {
		var err error
		out, err = c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	})
	return out, err
}

// Exists reports whether key exists.
func (c *Client) Exists(ctx context.Context, bucket, key string) (bool, error) {
	err := c.awaitServer(ctx, func() error {
		_, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	})
	if err == nil {
		return true, nil
	}
	if err = c.wrap("head", bucket, key, err); errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return false, err
}

// Object is one listed object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
	// ETag is the object's ETag as the server lists it (quoted).
	ETag string
}

// List lists the keys under prefix. With delim "/", keys in deeper
// "folders" are left out and the folders (common prefixes, ending in "/")
// are returned instead.
func (c *Client) List(ctx context.Context, bucket, prefix, delim string) ([]Object, []string, error) {
	var objs []Object
	var dirs []string
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	p := s3.NewListObjectsV2Paginator(c.s3, in)
	for p.HasMorePages() {
		var page *s3.ListObjectsV2Output
		err := c.awaitServer(ctx, func() error {
			var err error
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return nil, nil, c.wrap("list", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			objs = append(objs, Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified),
				ETag: aws.ToString(o.ETag)})
		}
		for _, cp := range page.CommonPrefixes {
			dirs = append(dirs, aws.ToString(cp.Prefix))
		}
	}
	return objs, dirs, nil
}

// Delete removes key; a missing key is no error.
func (c *Client) Delete(ctx context.Context, bucket, key string) error {
	err := c.awaitServer(ctx, func() error {
		_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	})
	if err != nil {
		if err = c.wrap("delete", bucket, key, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// CreateBucket makes a bucket (tests, set-up); one that exists is no error.
func (c *Client) CreateBucket(ctx context.Context, bucket string) error {
	err := c.awaitServer(ctx, func() error {
		_, err := c.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		return err
	})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return c.wrap("create bucket", bucket, "", err)
	}
	return nil
}

// NoConditionalWritesError says a server ignored a precondition.
type NoConditionalWritesError struct {
	Endpoint, URL, What string
}

func (e *NoConditionalWritesError) Error() string {
	return fmt.Sprintf("object store %s (%s) does not honour conditional writes: %s", e.Endpoint, e.URL, e.What)
}

// Probe checks that the server honours conditional writes, using key (a
// small object it may create and keep): a create-only write of an existing
// key and a write conditioned on a wrong ETag must both be refused. Three
// round trips; call it once per process and place.
func (c *Client) Probe(ctx context.Context, u URL, key string) error {
	if _, err := c.Put(ctx, u.Bucket, key, []byte("pipec conditional write probe\n"), Cond{}); err != nil {
		return err
	}
	_, err := c.Put(ctx, u.Bucket, key, []byte("pipec conditional write probe\n"), Cond{IfNoneMatch: true})
	switch {
	case err == nil:
		return &NoConditionalWritesError{Endpoint: c.Endpoint, URL: u.Of(key),
			What: "a write with If-None-Match: * over an existing key was accepted"}
	case errors.Is(err, ErrNotImplemented):
		return &NoConditionalWritesError{Endpoint: c.Endpoint, URL: u.Of(key),
			What: "a write with If-None-Match: * was refused as not implemented"}
	case !errors.Is(err, ErrPrecondition):
		return err
	}
	_, err = c.Put(ctx, u.Bucket, key, []byte("pipec conditional write probe\n"), Cond{IfMatch: `"00000000000000000000000000000000"`})
	switch {
	case err == nil:
		return &NoConditionalWritesError{Endpoint: c.Endpoint, URL: u.Of(key),
			What: "a write with If-Match on a wrong ETag was accepted"}
	case errors.Is(err, ErrNotImplemented):
		return &NoConditionalWritesError{Endpoint: c.Endpoint, URL: u.Of(key),
			What: "a write with If-Match was refused as not implemented"}
	case !errors.Is(err, ErrPrecondition):
		return err
	}
	return nil
}

// wrap turns the SDK's errors into ErrNotFound and ErrPrecondition, and
// names the object.
func (c *Client) wrap(op, bucket, key string, err error) error {
	what := Scheme + bucket + "/" + key
	var re interface{ HTTPStatusCode() int }
	status := 0
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch {
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed" ||
		status == http.StatusConflict && code == "ConditionalRequestConflict":
		return fmt.Errorf("%s %s: %w", op, what, ErrPrecondition)
	case status == http.StatusNotImplemented || code == "NotImplemented":
		return fmt.Errorf("%s %s at %s: %w: %v", op, what, c.Endpoint, ErrNotImplemented, err)
	case code == "NoSuchBucket":
		return fmt.Errorf("%s %s at %s: the bucket does not exist", op, what, c.Endpoint)
	case status == http.StatusNotFound || code == "NoSuchKey" || code == "NotFound":
		return fmt.Errorf("%s %s: %w", op, what, ErrNotFound)
	}
	return fmt.Errorf("%s %s at %s: %w", op, what, c.Endpoint, err)
}

// Each runs f on every item, at most 8 at a time (requests in flight to
// one server), and returns the first error, the others' context cancelled.
func Each(ctx context.Context, items []string, f func(context.Context, string) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, it := range items {
		g.Go(func() error { return f(ctx, it) })
	}
	return g.Wait()
}
