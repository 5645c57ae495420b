// fragment_map: print which lane of a warp holds which element of the mma.sync.m16n8k16 operands
// and of ldmatrix results, straight from common/ptx/fragment.cuh (the functions the kernels and
// tests/test_ptx.cu use), so the figures in the docs are the code's own layouts.
//
//   ./build/fragment_map                 every map as an ASCII grid
//   ./build/fragment_map a               one map: a, b, c, ldmatrix, ldmatrix_trans
//   ./build/fragment_map --json [MAP]    {"a": [[lane, reg, half, row, col], ...], ...}
//
// Grid cells are "lane:reg" (5:2 = lane 5, register 2); the legend above each grid says which half
// of the register an element is, a rule the program checks on every cell before printing it.
// ldmatrix (.x4): register i of every lane comes from 8x8 matrix i, so its cells show the lane only
// and its JSON rows give (row, col) inside matrix `reg`; row r of matrix i is read from the address
// that lane 8i + r passes (PTX ISA, ldmatrix). When the four matrices have the same layout (checked)
// the grid is printed once. scripts/fragment_figure.py draws the JSON as PNGs.
//
// Exit status: 0, or 1 for a bad argument or a map that does not cover its matrix exactly once.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// fragment.cuh is CUDA; compiled here by the host C++ compiler, its qualifiers are empty.
#ifndef __CUDACC__
#define __host__
#define __device__
#endif
#include "common/ptx/fragment.cuh"

namespace {

struct Element {
  int lane, reg, half, row, col;  // row, col: inside matrix `reg` for the ldmatrix maps
};

struct Map {
  const char* name;   // command-line and JSON key
  const char* title;  // first line of the grid
  char reg_prefix;    // register names: a0.., b0.., c0.., r0..
  int regs, halves;   // per lane
  int rows, cols;     // of one matrix
  bool per_register_matrix;  // ldmatrix: register i holds matrix i (one rows x cols grid each)
  const char* row_name;      // "row" or "k"
  const char* col_name;      // "col" or "n"
  std::vector<Element> elements;
};

// Row r of matrix i is read from the address of lane 8i + r (ldmatrix .x4, PTX ISA).
constexpr int ldmatrix_x4_address_lane(int matrix, int row) { return 8 * matrix + row; }

std::vector<Map> build_maps() {
  std::vector<Map> maps;
  Map a{"a", "mma.m16n8k16 A: 16x16 (row x col), registers a0..a3 of two 16-bit halves",
        'a', 4, 2, 16, 16, false, "row", "col", {}};
  Map b{"b", "mma.m16n8k16 B (\"col\"): 16x8 (k x n), registers b0..b1 of two 16-bit halves",
        'b', 2, 2, 16, 8, false, "k", "n", {}};
  Map c{"c", "mma.m16n8k16 C/D: 16x8 (row x col), registers c0..c3 of one f32 each",
        'c', 4, 1, 16, 8, false, "row", "col", {}};
  Map l{"ldmatrix", "ldmatrix.m8n8.x4: register ri of each lane from 8x8 matrix i (16-bit)",
        'r', 4, 2, 8, 8, true, "row", "col", {}};
  Map t{"ldmatrix_trans",
        "ldmatrix.m8n8.x4.trans: register ri of each lane from 8x8 matrix i, as stored in smem",
        'r', 4, 2, 8, 8, true, "row", "col", {}};
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      for (int e = 0; e < 2; ++e) {
        const fl::frag::RowCol ra = fl::frag::a_m16k16(lane, r, e);
        a.elements.push_back({lane, r, e, ra.row, ra.col});
        if (r < 2) {
          const fl::frag::RowCol rb = fl::frag::b_k16n8(lane, r, e);
          b.elements.push_back({lane, r, e, rb.row, rb.col});
        }
        const fl::frag::RowCol rl = fl::frag::ldmatrix_m8n8(lane, e);
        l.elements.push_back({lane, r, e, rl.row, rl.col});
        const fl::frag::RowCol rt = fl::frag::ldmatrix_m8n8_trans(lane, e);
        t.elements.push_back({lane, r, e, rt.row, rt.col});
      }
      const fl::frag::RowCol rc = fl::frag::c_m16n8(lane, r);
      c.elements.push_back({lane, r, 0, rc.row, rc.col});
    }
  }
  maps.push_back(a);
  maps.push_back(b);
  maps.push_back(c);
  maps.push_back(l);
  maps.push_back(t);
  return maps;
}

int matrices(const Map& m) { return m.per_register_matrix ? m.regs : 1; }

// Index of element (matrix, row, col) in a flat table of the map's cells.
int cell_index(const Map& m, int matrix, int row, int col) {
  return (matrix * m.rows + row) * m.cols + col;
}

// Every element of every matrix is held by exactly one (lane, reg, half). Returns the owner of
// each cell (index into m.elements), or an empty vector after printing what is wrong.
std::vector<int> owners(const Map& m) {
  std::vector<int> owner(matrices(m) * m.rows * m.cols, -1);
  bool ok = true;
  for (int i = 0; i < static_cast<int>(m.elements.size()); ++i) {
    const Element& x = m.elements[i];
    const int matrix = m.per_register_matrix ? x.reg : 0;
    if (x.row < 0 || x.row >= m.rows || x.col < 0 || x.col >= m.cols) {
      std::fprintf(stderr, "%s: lane %d reg %d half %d -> (%d, %d) is outside %dx%d\n", m.name,
                   x.lane, x.reg, x.half, x.row, x.col, m.rows, m.cols);
      ok = false;
      continue;
    }
    int& o = owner[cell_index(m, matrix, x.row, x.col)];
    if (o >= 0) {
      std::fprintf(stderr, "%s: (%d, %d) held twice\n", m.name, x.row, x.col);
      ok = false;
    }
    o = i;
  }
  for (int o : owner) ok = ok && o >= 0;
  if (!ok) {
    std::fprintf(stderr, "%s: does not cover its matrix exactly once\n", m.name);
    return {};
  }
  return owner;
}

// The half of a register, stated once in the legend when a rule gives it for every element.
std::string half_rule(const Map& m) {
  if (m.halves == 1) return "one element per register";
  bool by_col = true, by_row = true;
  for (const Element& x : m.elements) {
    by_col = by_col && x.half == x.col % 2;
    by_row = by_row && x.half == x.row % 2;
  }
  if (by_col) return std::string("low half = even ") + m.col_name + ", high half = odd " + m.col_name;
  if (by_row) return std::string("low half = even ") + m.row_name + ", high half = odd " + m.row_name;
  return "";  // no rule: the cells show the half
}

// True when every matrix of a per-register map has the same lanes and halves in the same cells.
bool matrices_alike(const Map& m, const std::vector<int>& owner) {
  for (int matrix = 1; matrix < matrices(m); ++matrix) {
    for (int row = 0; row < m.rows; ++row) {
      for (int col = 0; col < m.cols; ++col) {
        const Element& x = m.elements[owner[cell_index(m, 0, row, col)]];
        const Element& y = m.elements[owner[cell_index(m, matrix, row, col)]];
        if (x.lane != y.lane || x.half != y.half) return false;
      }
    }
  }
  return true;
}

void print_grid(const Map& m, const std::vector<int>& owner) {
  const std::string halves = half_rule(m);
  const bool once = m.per_register_matrix && matrices_alike(m, owner);
  std::printf("%s\n", m.title);
  if (m.per_register_matrix) {
    std::printf("cell = lane (register ri from matrix i); %s\n", halves.c_str());
    std::printf("@Tn = the lane whose address gives that row of matrix %s\n",
                once ? "0 / 1 / 2 / 3" : "i");
  } else {
    std::printf("cell = lane:register (5:%d = lane 5, %c%d)%s%s\n", m.regs - 1, m.reg_prefix,
                m.regs - 1, halves.empty() ? ":half" : "; ", halves.c_str());
  }
  const int width = m.per_register_matrix ? 3 : (halves.empty() ? 7 : 5);
  const int label = once ? 21 : (m.per_register_matrix ? 10 : 6);
  const char* rule = m.per_register_matrix ? "" : " |";
  for (int matrix = 0; matrix < (once ? 1 : matrices(m)); ++matrix) {
    std::printf("\n");
    if (once) {
      std::printf("matrix i -> ri, the same for i = 0..%d\n", matrices(m) - 1);
    } else if (m.per_register_matrix) {
      std::printf("matrix %d -> r%d\n", matrix, matrix);
    }
    std::printf("%*s", label, m.col_name);
    for (int col = 0; col < m.cols; ++col) {
      std::printf("%s%*d", (col > 0 && col % 8 == 0) ? rule : "", width, col);
    }
    std::printf("\n");
    for (int row = 0; row < m.rows; ++row) {
      if (row > 0 && row % 8 == 0) {
        std::printf("%*s", label, "");
        for (int col = 0; col < m.cols; ++col) {
          std::printf("%s%s", (col > 0 && col % 8 == 0) ? "-+" : "",
                      std::string(width, '-').c_str());
        }
        std::printf("\n");
      }
      if (once) {
        std::string lanes;
        for (int i = 0; i < matrices(m); ++i) {
          lanes += (i ? "/" : "") + std::to_string(ldmatrix_x4_address_lane(i, row));
        }
        std::printf("%s %d @T%-12s", m.row_name, row, lanes.c_str());
      } else if (m.per_register_matrix) {
        std::printf("%s %d @T%-2d", m.row_name, row, ldmatrix_x4_address_lane(matrix, row));
      } else {
        std::printf("%s %2d", m.row_name[1] ? m.row_name : " k", row);
      }
      for (int col = 0; col < m.cols; ++col) {
        const Element& x = m.elements[owner[cell_index(m, matrix, row, col)]];
        char text[16];
        if (m.per_register_matrix) {
          std::snprintf(text, sizeof text, "%d", x.lane);
        } else if (halves.empty()) {
          std::snprintf(text, sizeof text, "%d:%d:%d", x.lane, x.reg, x.half);
        } else {
          std::snprintf(text, sizeof text, "%d:%d", x.lane, x.reg);
        }
        std::printf("%s%*s", (col > 0 && col % 8 == 0) ? rule : "", width, text);
      }
      std::printf("\n");
    }
  }
}

void print_json(const std::vector<const Map*>& selected) {
  std::printf("{");
  for (size_t i = 0; i < selected.size(); ++i) {
    const Map& m = *selected[i];
    std::printf("%s\n  \"%s\": [", i ? "," : "", m.name);
    for (size_t j = 0; j < m.elements.size(); ++j) {
      const Element& x = m.elements[j];
      std::printf("%s[%d, %d, %d, %d, %d]", j ? (j % 8 ? ", " : ",\n    ") : "\n    ", x.lane,
                  x.reg, x.half, x.row, x.col);
    }
    std::printf("\n  ]");
  }
  std::printf("\n}\n");
}

void usage(const std::vector<Map>& maps) {
  std::fprintf(stderr, "usage: fragment_map [--json] [MAP...]   MAP:");
  for (const Map& m : maps) std::fprintf(stderr, " %s", m.name);
  std::fprintf(stderr, " (default: all)\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Map> maps = build_maps();
  bool json = false;
  std::vector<const Map*> selected;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
      continue;
    }
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(maps);
      return 0;
    }
    const Map* found = nullptr;
    for (const Map& m : maps) found = std::strcmp(argv[i], m.name) ? found : &m;
    if (!found) {
      std::fprintf(stderr, "fragment_map: unknown map or option '%s'\n", argv[i]);
      usage(maps);
      return 1;
    }
    selected.push_back(found);
  }
  if (selected.empty()) {
    for (const Map& m : maps) selected.push_back(&m);
  }

  std::vector<std::vector<int>> owner_of;
  for (const Map* m : selected) {
    owner_of.push_back(owners(*m));
    if (owner_of.back().empty()) return 1;
  }
  if (json) {
    print_json(selected);
    return 0;
  }
  for (size_t i = 0; i < selected.size(); ++i) {
    if (i) std::printf("\n");
    print_grid(*selected[i], owner_of[i]);
  }
  return 0;
}
