# fixtures.sh - builds the folder fixtures the CLI tests share (sourced
# after lib.sh). make_odd_tree DIR writes DIR/good (every odd-but-valid
# image kind) and DIR/bad (every bad-file kind) as two class folders; the
# raw fixtures are in DIR.fx. DAMAGED_INSIDE is a JPEG whose entropy data
# is cut but whose markers are intact: only a full decode notices it.
GOOD_FIXTURES="rgb.jpg progressive.jpg gray.jpg cmyk.jpg cmyk_adobe.jpg ycck.jpg
exif_1.jpg exif_2.jpg exif_3.jpg exif_4.jpg exif_5.jpg exif_6.jpg exif_7.jpg exif_8.jpg
exif_after_xmp.jpg odd_sampling.jpg rgb.png rgba.png gray.png gray_alpha.png palette.png
palette_trns.png rgb16.png gray16.png gray1.png gray2.png gray4.png rgb_interlaced.png
rgba_interlaced.png exif_6.png png_as.JPEG big.jpg"
BAD_FIXTURES="empty.jpg truncated.jpg truncated.png garbage.jpg text.jpg huge.png huge.jpg
badcrc.png jpeg_header_only.jpg"

make_odd_tree() {
  local dir=$1
  mkdir -p "$dir.fx" "$dir/good" "$dir/bad"
  "$IMS_FIXTURES" "$dir.fx" || { fail "make_images failed"; return 1; }
  local f
  for f in $GOOD_FIXTURES; do cp "$dir.fx/$f" "$dir/good/$f" || fail "fixture $f missing"; done
  for f in $BAD_FIXTURES; do cp "$dir.fx/$f" "$dir/bad/$f" || fail "fixture $f missing"; done
}

DAMAGED_INSIDE=truncated_eoi.jpg

n_words() { echo $# ; }
