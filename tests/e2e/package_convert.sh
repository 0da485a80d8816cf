# `ignition convert` both ways with byte-exact round trips, `ignition sign` promotion, and the
# tamper suite: a flipped payload byte, a truncated companion and a modified manifest are rejected
# with non-zero exits naming what is wrong.
source "$(dirname "$0")/lib/package_common.bash"

step "export"
entry=$(export_entry)

step "convert directory -> packed -> directory"
expect_output "$WORK/packed.safetensors" "$IGNITION" convert "$entry" --form packed --output "$WORK/packed.safetensors"
expect_output "signature verified" "$FLARE" inspect "$WORK/packed.safetensors"
expect_output "$WORK/roundtrip" "$IGNITION" convert "$WORK/packed.safetensors" --form directory --output "$WORK/roundtrip"
(cd "$entry" && find . -type f | sort) >"$WORK/entry.files"
(cd "$WORK/roundtrip" && find . -type f | sort) >"$WORK/roundtrip.files"
cmp "$WORK/entry.files" "$WORK/roundtrip.files" || fail "round trip changed the file set"
while read -r file; do
  cmp "$entry/$file" "$WORK/roundtrip/$file" || fail "round trip changed $file"
done <"$WORK/entry.files"
expect_output "" "$IGNITION" convert "$WORK/roundtrip" --form packed --output "$WORK/packed2.safetensors"
cmp "$WORK/packed.safetensors" "$WORK/packed2.safetensors" || fail "packed forms differ"
expect_fail 2 "already exists\|exists" "$IGNITION" convert "$entry" --form packed --output "$WORK/packed.safetensors"
expect_fail 2 "packed or directory" "$IGNITION" convert "$entry" --form zip --output "$WORK/zip"

step "sign: promote the development package"
expect_fail 2 "publishing" "$IGNITION" sign "$entry" --output "$WORK/signed" --config "$CONFIG"
mkdir -p "$WORK/keys"
cp "$HOME/.config/flare/development-signing-key.pem" "$WORK/keys/publisher.pem" # owner-only copy
chmod 600 "$WORK/keys/publisher.pem"
printf '[publishing]\nsigning_key = "%s"\nnamespace = "example-publisher"\nofficial_source = "%s"\n' \
  "$WORK/keys/publisher.pem" "https://huggingface.co/example-publisher/tiny" >"$WORK/publisher.toml"
cp "$HOME/.config/flare/development-publisher.json" "$WORK/publisher-dev.json"
expect_output "$WORK/signed" "$IGNITION" sign "$entry" --output "$WORK/signed" --config "$WORK/publisher.toml" \
  --publisher-keys "$WORK/publisher-dev.json"
expect_fail 1 "no verification key" "$FLARE" inspect "$WORK/signed"

step "tamper: flipped payload byte"
cp -r "$entry" "$WORK/tampered"  # a real copy: cache companions are hard links to blobs
companion=$(cd "$WORK/tampered" && find . -name '*.safetensors' ! -name model.safetensors | sort | head -1)
companion=${companion#./}
flip_last_byte "$WORK/tampered/$companion"
expect_fail 1 "${companion%.safetensors}" "$IGNITION" convert "$WORK/tampered" --form packed --output "$WORK/t.safetensors"
[[ ! -e $WORK/t.safetensors ]] || fail "convert wrote a damaged package"
expect_fail 1 "does not match its signed hash" "$IGNITION" sign "$WORK/tampered" --output "$WORK/t2" \
  --config "$WORK/publisher.toml" --publisher-keys "$WORK/publisher-dev.json"

step "tamper: truncated companion"
rm -rf "$WORK/tampered" && cp -r "$entry" "$WORK/tampered"
truncate -s -1 "$WORK/tampered/$companion"
expect_fail 1 "" "$FLARE" inspect "$WORK/tampered"
grep -q "$(basename "$companion")\|${companion%.safetensors}" "$WORK/out" || { cat "$WORK/out"; fail "inspect does not name the companion"; }

step "tamper: modified signed manifest"
cp "$WORK/packed.safetensors" "$WORK/bad.safetensors"
patch_manifest() { # changes one base64 character inside flare.manifest, keeping the length
  node -e '
    const fs = require("fs"); const p = process.argv[1]; const b = fs.readFileSync(p);
    const n = Number(b.readBigUInt64LE(0)); const h = b.subarray(8, 8 + n).toString("latin1");
    const at = h.indexOf("\"flare.manifest\":\"") + 40;
    const c = h[at] === "A" ? "B" : "A"; b.write(c, 8 + at, "latin1"); fs.writeFileSync(p, b);' "$1"
}
patch_manifest "$WORK/bad.safetensors"
expect_fail 1 "signature\|manifest" "$FLARE" inspect "$WORK/bad.safetensors"
echo "package_convert: ok"
