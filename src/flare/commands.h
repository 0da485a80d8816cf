#pragma once
namespace flare::cli {
int main(int argc, char** argv);
}
