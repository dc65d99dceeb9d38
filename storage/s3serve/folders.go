package s3serve

import (
	"os"

	"github.com/johannesboyne/gofakes3"
)

// BucketNameRule is the bucket names the endpoint serves (gofakes3's rule:
// S3's, less the dotted names S3 also allows).
const BucketNameRule = "3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit"

// UnservedFolders lists root's top-level folders that are not served as
// buckets because their names break BucketNameRule: the endpoint answers
// NoSuchBucket for them, and a user who put an archive under "A" or
// "my_data" is told at start rather than by a 404 later.
func UnservedFolders(root string) ([]string, error) {
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && gofakes3.ValidateBucketName(de.Name()) != nil {
			out = append(out, de.Name())
		}
	}
	return out, nil
}
