#include "fetch_form.h"
