/*
 * models.c - the architectures: convnet7, resnet18, resnet50, vgg16.
 *
 * Written as torchvision writes them, module by module in registration
 * order, so tensor names, shapes and order equal torchvision's
 * state_dict() and ImageNet weights exported from PyTorch load unchanged.
 * convnet7 is imshard's small-image network (after the 7-layer convnet of
 * the iNaturalist experiments): five 3x3 convolution blocks with batch
 * norm, global average pooling and two linear layers, any input size.
 */
#include <stdio.h>
#include <string.h>

#include "train/model_internal.h"

const char *const nn_models_known[] = {"convnet7", "resnet18", "resnet50",
				       "vgg16", NULL};

/* conv -> bn (-> relu) with torchvision's ResNet init. */
static int conv_bn(nn_model *m, const char *conv, const char *bn, int in,
		   int c_out, int k, int stride, int relu)
{
	int x = nn_b_conv(m, conv, in, c_out, k, stride, k / 2, 0,
			  NN_INIT_KAIMING_FAN_OUT);
	x = nn_b_bn(m, bn, x);
	return relu ? nn_b_relu(m, x) : x;
}

static int convnet7(nn_model *m)
{
	/* features.<i> indices count every module of the Sequential, as
	 * PyTorch names them: conv, bn, relu(, maxpool) per block. */
	static const int widths[5] = {32, 64, 128, 256, 256};
	int x = -1, idx = 0;
	char cn[32], bn[32];
	for (int b = 0; b < 5; b++) {
		snprintf(cn, sizeof(cn), "features.%d", idx);
		snprintf(bn, sizeof(bn), "features.%d", idx + 1);
		x = conv_bn(m, cn, bn, x, widths[b], 3, 1, 1);
		idx += 3;
		if (b < 4 && m->graph.build_rc == 0 &&
		    m->graph.nodes[x].h >= 2 && m->graph.nodes[x].w >= 2) {
			x = nn_b_maxpool(m, x, 2, 2, 0);
			idx++;
		}
	}
	x = nn_b_adaptive_avgpool(m, x, 1, 1);
	x = nn_b_flatten(m, x);
	x = nn_b_linear(m, "classifier.0", x, 256, NN_INIT_UNIFORM_FAN_IN,
			NN_INIT_UNIFORM_FAN_IN);
	x = nn_b_relu(m, x);
	x = nn_b_dropout(m, x, 0.2f);
	return nn_b_linear(m, "classifier.3", x, m->classes,
			   NN_INIT_UNIFORM_FAN_IN, NN_INIT_UNIFORM_FAN_IN);
}

/* torchvision BasicBlock (expansion 1) and Bottleneck (expansion 4, the
 * stride on the 3x3 convolution: "ResNet v1.5"). */
static int block(nn_model *m, int bottleneck, const char *p, int in,
		 int planes, int stride)
{
	char a[64], b[64];
	int c_in = m->graph.build_rc ? 0 : m->graph.nodes[in].c;
	int c_out = bottleneck ? planes * 4 : planes;
	int x;
	if (bottleneck) {
		snprintf(a, sizeof(a), "%s.conv1", p);
		snprintf(b, sizeof(b), "%s.bn1", p);
		x = conv_bn(m, a, b, in, planes, 1, 1, 1);
		snprintf(a, sizeof(a), "%s.conv2", p);
		snprintf(b, sizeof(b), "%s.bn2", p);
		x = conv_bn(m, a, b, x, planes, 3, stride, 1);
		snprintf(a, sizeof(a), "%s.conv3", p);
		snprintf(b, sizeof(b), "%s.bn3", p);
		x = conv_bn(m, a, b, x, c_out, 1, 1, 0);
	} else {
		snprintf(a, sizeof(a), "%s.conv1", p);
		snprintf(b, sizeof(b), "%s.bn1", p);
		x = conv_bn(m, a, b, in, planes, 3, stride, 1);
		snprintf(a, sizeof(a), "%s.conv2", p);
		snprintf(b, sizeof(b), "%s.bn2", p);
		x = conv_bn(m, a, b, x, planes, 3, 1, 0);
	}
	int skip = in;
	if (stride != 1 || c_in != c_out) {
		snprintf(a, sizeof(a), "%s.downsample.0", p);
		snprintf(b, sizeof(b), "%s.downsample.1", p);
		skip = conv_bn(m, a, b, in, c_out, 1, stride, 0);
	}
	x = nn_b_add(m, x, skip);
	return nn_b_relu(m, x);
}

static int resnet(nn_model *m, int bottleneck, const int blocks[4])
{
	int x = conv_bn(m, "conv1", "bn1", -1, 64, 7, 2, 1);
	x = nn_b_maxpool(m, x, 3, 2, 1);
	char p[32];
	for (int l = 0; l < 4; l++)
		for (int k = 0; k < blocks[l]; k++) {
			snprintf(p, sizeof(p), "layer%d.%d", l + 1, k);
			x = block(m, bottleneck, p, x, 64 << l,
				  k == 0 && l > 0 ? 2 : 1);
		}
	x = nn_b_adaptive_avgpool(m, x, 1, 1);
	x = nn_b_flatten(m, x);
	return nn_b_linear(m, "fc", x, m->classes, NN_INIT_UNIFORM_FAN_IN,
			   NN_INIT_UNIFORM_FAN_IN);
}

static int vgg16(nn_model *m)
{
	/* torchvision cfg "D"; 0 is a max pool */
	static const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0,
				  512, 512, 512, 0, 512, 512, 512, 0};
	int x = -1, idx = 0;
	char name[32];
	for (size_t i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++) {
		if (!cfg[i]) {
			x = nn_b_maxpool(m, x, 2, 2, 0);
			idx++;
			continue;
		}
		snprintf(name, sizeof(name), "features.%d", idx);
		x = nn_b_conv(m, name, x, cfg[i], 3, 1, 1, 1,
			      NN_INIT_KAIMING_FAN_OUT);
		x = nn_b_relu(m, x);
		idx += 2;
	}
	x = nn_b_adaptive_avgpool(m, x, 7, 7);
	x = nn_b_flatten(m, x);
	x = nn_b_linear(m, "classifier.0", x, 4096, NN_INIT_NORMAL_001,
			NN_INIT_ZERO);
	x = nn_b_relu(m, x);
	x = nn_b_dropout(m, x, 0.5f);
	x = nn_b_linear(m, "classifier.3", x, 4096, NN_INIT_NORMAL_001,
			NN_INIT_ZERO);
	x = nn_b_relu(m, x);
	x = nn_b_dropout(m, x, 0.5f);
	return nn_b_linear(m, "classifier.6", x, m->classes,
			   NN_INIT_NORMAL_001, NN_INIT_ZERO);
}

int nn_models_build(nn_model *m, const char *name, ims_error *err)
{
	static const int r18[4] = {2, 2, 2, 2}, r50[4] = {3, 4, 6, 3};
	if (!strcmp(name, "convnet7"))
		convnet7(m);
	else if (!strcmp(name, "resnet18"))
		resnet(m, 0, r18);
	else if (!strcmp(name, "resnet50"))
		resnet(m, 1, r50);
	else if (!strcmp(name, "vgg16"))
		vgg16(m);
	else
		return ims_fail(err, IMS_EINVAL,
				"unknown model '%s' (convnet7, resnet18, resnet50, vgg16)",
				name);
	return m->graph.build_rc;
}
