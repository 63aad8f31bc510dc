/* fuzz_lst.c - an im2rec .lst file and a classes file, as `imshard pack`,
 * `subset` and `convert` read them: the plain reader, the label bound under
 * each kind of declaration (none, --max-label, class names) and the
 * classes file. */
#include "datasets/datasets.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600];
	ims_error err;
	ds_list l;
	fuzz_file("x.lst", data, size, path, sizeof(path));
	ds_list_init(&l);
	ds_list_read(path, &l, &err);
	size_t distinct = 0, bad = 0;
	ds_list_distinct_labels(&l, &distinct, &err);
	ds_list_check_labels(&l, 0, DS_LABEL_AUTO, &bad, &err);
	ds_list_release(&l);

	/* The bound as pack and subset apply it: from the list's own labels,
	 * from a --max-label taken from the input, and from class names. */
	ds_list_read_opts o;
	ds_list_read_opts_init(&o);
	ds_list_init(&l);
	ds_list_read_with(path, &o, &l, &err);
	ds_list_release(&l);
	o.max_label = size ? (int64_t)(data[0] % 8) * 1000 : 0;
	ds_list_init(&l);
	ds_list_read_with(path, &o, &l, &err);
	ds_list_release(&l);
	o.max_label = DS_LABEL_AUTO;
	ds_list_init(&l);
	for (size_t i = 0; i < (size ? data[size - 1] % 5u : 0u); i++)
		ds_list_add_class(&l, "c", NULL, &err);
	ds_list_read_with(path, &o, &l, &err);
	ds_list_release(&l);

	fuzz_file("x.classes", data, size, path, sizeof(path));
	ds_list_init(&l);
	ds_classes_read(path, &l, &err);
	ds_list_release(&l);
	return 0;
}
