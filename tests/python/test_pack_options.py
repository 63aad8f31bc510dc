"""imshard.pack's and imshard.convert's arguments: each value the C side
would take for another or cut short (a class name at its NUL, a set's
or a dict's order for the labels', one string for a list of names, the
truth of "no" for a yes/no option) refused with an ArgumentError that
names the argument."""
import re

import numpy as np
import pytest

import imshard


def test_classes_given_as_one_string_are_refused(sample, tmp_path):
    # a str is a sequence of characters: before, classes="cat" packed a
    # split whose classes were 'c', 'a' and 't'
    img = sample["img"]
    rel = str(sorted(p for p in img.rglob("*") if p.is_file())[0].relative_to(img))
    for classes in ("cat", b"cat"):
        with pytest.raises(imshard.ArgumentError, match="classes must be a list of names"):
            imshard.pack([(0, rel)], img, tmp_path / "p" / "train", classes=classes)
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())
    rep = imshard.pack([(0, rel)], img, tmp_path / "q" / "train", classes=("cat",))
    assert imshard.Split(rep["manifest"]).classes == ["cat"]


def test_classes_without_an_order_of_their_own_are_refused(sample, tmp_path):
    # label i is classes[i]: before, {"b": 1, "a": 0} packed label 0 as
    # 'b' (a dict's insertion order), and a set named the labels in hash
    # order, each without a word
    img = sample["img"]
    rows = [(k, str(p.relative_to(img)))
            for k, p in enumerate(sorted(p for p in img.rglob("*") if p.is_file())[:2])]
    for classes in ({"b": 1, "a": 0}, {"a", "b"}, frozenset({"a", "b"}), {"a": 0}.keys()):
        with pytest.raises(imshard.ArgumentError,
                           match=r"^classes must be a list of names in label order .*not a %s"
                           % type(classes).__name__):
            imshard.pack(rows, img, tmp_path / "p" / "train", classes=classes)
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())
    # what has an order: a list, a tuple, a generator, a dict's values
    rep = imshard.pack(rows, img, tmp_path / "q" / "train",
                       classes=(n for n in ["b", "a"]))
    assert imshard.Split(rep["manifest"]).classes == ["b", "a"]


def test_class_names_holding_a_nul_or_no_utf8_are_refused(sample, tmp_path):
    # before: "a\0b" packed as the class 'a' without a word (the C side
    # read the name up to its NUL), and a name with a lone surrogate (an
    # os.fsdecode'd folder name) raised UnicodeEncodeError naming no class
    img = sample["img"]
    rel = str(sorted(p for p in img.rglob("*") if p.is_file())[0].relative_to(img))
    for name, why in (("a\0b", r"^class 1's name 'a\\x00b' holds a NUL character"),
                      ("a\udcff", r"^class 1's name 'a\\udcff' is not UTF-8")):
        with pytest.raises(imshard.ArgumentError, match=why):
            imshard.pack([(0, rel)], img, tmp_path / "p" / "train", classes=["ok", name])
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())


def test_paths_and_text_holding_a_nul_are_named(sample, tmp_path):
    # before: a bare "embedded null byte" (or "character") ValueError
    # naming no argument
    img = sample["img"]
    rel = str(sorted(p for p in img.rglob("*") if p.is_file())[0].relative_to(img))
    for root, out, what in ((str(img) + "\0", tmp_path / "p" / "train", "root"),
                            (img, str(tmp_path / "p" / "tr\0ain"), "out")):
        with pytest.raises(imshard.ArgumentError,
                           match="^%s holds a NUL character, which no path can" % what):
            imshard.pack([(0, rel)], root, out)
        with pytest.raises(imshard.ArgumentError,
                           match="^%s holds a NUL character, which no path can" % what):
            imshard.convert("folder", root, out)
    with pytest.raises(imshard.ArgumentError,
                       match="^list_or_rows holds a NUL character, which no path can"):
        imshard.pack(str(tmp_path / "list\0.lst"), img, tmp_path / "p" / "train")
    with pytest.raises(imshard.ArgumentError, match="^exts must not hold a NUL character"):
        imshard.convert("folder", img, tmp_path / "c", exts="jpg\0")
    for classes, why in (("Aves\0", "^classes must not hold a NUL character"),
                         (["Aves", "a\0b"], "^classes must be names without a comma or NUL")):
        with pytest.raises(imshard.ArgumentError, match=why):
            imshard.convert("inat2017", img, tmp_path / "c", classes=classes)
    assert not (tmp_path / "p").exists() and not (tmp_path / "c").exists()


def test_yes_no_options_take_only_true_or_false(sample, tmp_path):
    # before: any value's truth was taken, so force="no", shuffle="false"
    # or check_decode=[] were answers (the string "no" is true)
    lst = sample["dir"] / "packed" / "val.lst"
    for opt in ("force", "center_crop", "check_decode", "shuffle"):
        for v in ("no", "false", 2, None if opt == "shuffle" else [], 1.0):
            with pytest.raises(imshard.ArgumentError, match="^%s must be True or False, got %s$"
                               % (opt, re.escape(repr(v)))):
                imshard.pack(lst, sample["img"], tmp_path / "w", **{opt: v})
    for opt in ("force", "center_crop", "check_decode", "shuffle", "no_clutter", "recursive",
                "allow_short"):
        with pytest.raises(imshard.ArgumentError, match="^%s must be True or False" % opt):
            imshard.convert("folder", sample["img"], tmp_path / "c", **{opt: "no"})
    assert not (tmp_path / "w").exists() and not (tmp_path / "c").exists()
    # True, False, 1, 0 and NumPy's bools are taken
    for i, v in enumerate((False, 0, np.False_)):
        rep = imshard.pack(lst, sample["img"], tmp_path / ("p%d" % i) / "s", check_decode=v,
                           shuffle=v)
        assert rep["packed"] == rep["listed"] > 0
    rep = imshard.pack(lst, sample["img"], tmp_path / "p0" / "s", force=1, shuffle=np.True_)
    assert rep["order"] == "shuffled"


def test_text_options_of_another_type_are_named(sample, tmp_path):
    # before: "TypeError: argument 7 must be str or None, not int" (the
    # option's position in the C call), naming none of the caller's
    lst = sample["dir"] / "packed" / "val.lst"
    for opt, v in (("encoding", 5), ("encoding", b"jpeg")):
        for call in (lambda **kw: imshard.pack(lst, sample["img"], tmp_path / "w", **kw),
                     lambda **kw: imshard.convert("folder", sample["img"], tmp_path / "c", **kw)):
            with pytest.raises(imshard.ArgumentError,
                               match="^%s must be a string, got %s$" % (opt, re.escape(repr(v)))):
                call(**{opt: v})
    for kw, what in ((dict(exts=[".jpg"]), "exts"), (dict(exts=5), "exts")):
        with pytest.raises(imshard.ArgumentError, match="^%s must be a string, got " % what):
            imshard.convert("folder", sample["img"], tmp_path / "c", **kw)
    with pytest.raises(imshard.ArgumentError, match="^dataset must be a string, got 5$"):
        imshard.convert(5, sample["img"], tmp_path / "c")
    with pytest.raises(imshard.ArgumentError, match="^classes must be a list of names, got 5$"):
        imshard.convert("inat2017", sample["img"], tmp_path / "c", classes=5)
    assert not (tmp_path / "w").exists() and not (tmp_path / "c").exists()
