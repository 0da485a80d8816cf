#pragma once
namespace flare::ignition {
int main(int argc, char** argv);
}
