package objstore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
)

// SetMultipart makes c upload files above threshold bytes in parts of
// part bytes, so a test sees a multipart upload without gigabytes.
func SetMultipart(c *Client, threshold, part int64) {
	c.tm = transfermanager.New(c.s3, func(o *transfermanager.Options) {
		o.MultipartUploadThreshold, o.PartSizeBytes = threshold, part
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
}

// NewAnsweringWithin is New with another bound on how long a request may
// go without a byte moving (AnswerWithin).
func NewAnsweringWithin(ctx context.Context, d time.Duration) (*Client, error) {
	return newClient(ctx, d)
}
