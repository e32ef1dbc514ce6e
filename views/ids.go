package views

import "unicode/utf8"

// Ids are cut in the middle, not at the end: ids of one kind share their
// head (ik_cus_…, msg_…, a framework's prefix) and differ in their tail, so
// a cut that keeps the tail keeps two ids apart where a cut to the first
// characters made them alike (ik_cus_00000001 and ik_cus_00000002 are
// ik_cus_…00001 and ik_cus_…00002).
const (
	shortIDMax  = 14 // an id this long or shorter is shown whole
	shortIDHead = 7
	shortIDTail = 5
)

// ShortID is id as a sentence shows it: whole up to 14 characters, else
// its first 7 and its last 5 around "…". The page keeps the whole id
// beside it (cutID), drawn on focus and on a tap of the copy button; the
// link's title carries it too, which screen readers read as its
// description.
func ShortID(id string) string {
	if utf8.RuneCountInString(id) <= shortIDMax {
		return id
	}
	r := []rune(id)
	return string(r[:shortIDHead]) + "…" + string(r[len(r)-shortIDTail:])
}
